/**
 * `@nrt/cli`: the composition root and the `nrt` command.
 *
 * @module
 */

export {
  archPackNamed,
  ArchPackToken,
  createNrtContainer,
  createNrtRuntime,
  type NrtContainer,
  type NrtContainerOptions,
  nrtPlugins,
  type PluginToken,
  PortalToken,
  SHIPPED_ARCH_PACKS,
  simulatedSpec,
} from "./container.ts";
export {
  formatInspect,
  type InspectIo,
  inspectNeff,
  type InspectReport,
  type InspectTensor,
  type InspectUcodeLib,
  runInspect,
} from "./inspect.ts";
export {
  buildDemoModels,
  isLoopbackHost,
  parseServeArgs,
  type RunningServer,
  runServe,
  type ServeOptions,
  type ShutdownReport,
  startServer,
  UsageError,
} from "./serve.ts";
export { directoryFiles, type DirectoryFilesOptions } from "./repository_dir.ts";
export { adminToken, newAdminToken, writeAdminToken } from "./admin_token.ts";
export { SimDeviceView } from "./sim_device_view.ts";
