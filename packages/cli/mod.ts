/**
 * `@nrt/cli`: the composition root and the `nrt` command.
 *
 * @module
 */
export { createNrtContainer, type NrtContainerOptions } from "./container.ts";
export { formatInspect, inspectNeff, type InspectIo, type InspectReport, runInspect } from "./inspect.ts";
export { buildDemoModels, directoryFiles, parseServeArgs, type RunningServer, runServe, type ServeOptions, startServer } from "./serve.ts";
export { SimDeviceView } from "./sim_device_view.ts";
