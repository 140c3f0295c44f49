/**
 * `@nrt/cli`: the composition root and the `nrt` command.
 *
 * @module
 */

export {
  ArchPackToken,
  archPackNamed,
  createNrtContainer,
  createNrtRuntime,
  type NrtContainerOptions,
  nrtPlugins,
  PortalToken,
  SHIPPED_ARCH_PACKS,
  simulatedSpec,
} from "./container.ts";
export { formatInspect, inspectNeff, type InspectIo, type InspectReport, runInspect } from "./inspect.ts";
export { buildDemoModels, isLoopbackHost, parseServeArgs, type RunningServer, runServe, type ServeOptions, startServer, UsageError } from "./serve.ts";
export { directoryFiles, type DirectoryFilesOptions } from "./repository_dir.ts";
export { adminToken, newAdminToken, writeAdminToken } from "./admin_token.ts";
export { SimDeviceView } from "./sim_device_view.ts";
