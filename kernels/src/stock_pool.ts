// The stock Pool firmware image: what boot() installs before any custom-op library is prepared.
import { customop_cleanup } from "./_abi";

/** The ucode API level this image implements. */
export function ucode_api_level(): i32 {
  return 3;
}

/** The architecture id the DRAM image carries in its first word (the DRAM image is copied to address 0). */
export function ucode_arch(): i32 {
  return load<i32>(0);
}

/** The firmware's no-op. */
export function noop(): void {
  customop_cleanup();
}
