// faults: adversarial kernels for the simulator's error paths — a trap, an out-of-bounds load, an endless loop,
// a DRAM-window violation, and a printf flood.
import { LOCAL_DRAM, customop_cleanup, customop_next_int, customop_total_cpus, dram_addr_to_soc_addr, get_cpu_id, q7_write } from "./_abi";

/** Executes `unreachable`. */
export function trap(): void {
  unreachable();
}

/** Loads from 0xFFFFFFF0, far past the end of any NeuronCore memory. */
export function oob(): void {
  load<i32>(0xFFFFFFF0);
  customop_cleanup();
}

/** Never returns. */
export function spin(): void {
  let i: i32 = 0;
  while (true) {
    i++;
    if (i == 0x7FFFFFFF) i = 0;
  }
}

/** Passes an address outside the local DRAM window to dram_addr_to_soc_addr, which must fault. */
export function bad_dram(): void {
  dram_addr_to_soc_addr(0x12345);
  customop_cleanup();
}

/** Writes a decimal number at `p`; returns the number of bytes written. */
function putDecimal(p: i32, value: i64): i32 {
  let digits = 1;
  for (let v = value; v >= 10; v /= 10) digits++;
  let v = value;
  for (let i = digits - 1; i >= 0; i--) {
    store<u8>(p + i, <u8>(48 + <i32>(v % 10))); // '0' + digit
    v /= 10;
  }
  return digits;
}

/** Writes customop_next_int() lines "line <k> from core <c>\n" to stdout, one q7_write per line. */
export function printf(): void {
  const lines = customop_next_int();
  const cpu = get_cpu_id();
  if (cpu < customop_total_cpus()) {
    // The text is formatted in this core's own SoC slice, so the 8 cores never share a buffer.
    const buf = dram_addr_to_soc_addr(LOCAL_DRAM);
    for (let k: i64 = 0; k < lines; k++) {
      let p = buf;
      store<u8>(p++, 0x6c); // l
      store<u8>(p++, 0x69); // i
      store<u8>(p++, 0x6e); // n
      store<u8>(p++, 0x65); // e
      store<u8>(p++, 0x20); // ' '
      p += putDecimal(p, k);
      store<u8>(p++, 0x20); // ' '
      store<u8>(p++, 0x66); // f
      store<u8>(p++, 0x72); // r
      store<u8>(p++, 0x6f); // o
      store<u8>(p++, 0x6d); // m
      store<u8>(p++, 0x20); // ' '
      store<u8>(p++, 0x63); // c
      store<u8>(p++, 0x6f); // o
      store<u8>(p++, 0x72); // r
      store<u8>(p++, 0x65); // e
      store<u8>(p++, 0x20); // ' '
      p += putDecimal(p, <i64>cpu);
      store<u8>(p++, 0x0a); // '\n'
      q7_write(1, buf, p - buf);
    }
  }
  customop_cleanup();
}
