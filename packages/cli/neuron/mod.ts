/**
 * The Neuron tool formats behind `nrt ls` and `nrt monitor`: pure functions from a {@linkcode NeuronSnapshot} (our
 * plain-data view of devices, runtimes, host and instance) to the outputs AWS's `neuron-ls` and `neuron-monitor`
 * document, so dashboards and alerts built on them (and on `neuron-monitor-prometheus.py`) read nrt's simulated
 * devices unchanged.
 *
 * - `neuron_ls.ts`: the table, `-j` JSON and `--output-format json`.
 * - `neuron_monitor_config.ts`: the `-c` configuration file.
 * - `neuron_monitor.ts`: one report per period, one line of JSON each, and the group scheduling.
 * - `memory_categories.ts`, `execution_outcomes.ts`: how our dmem categories and `NRT_STATUS` codes land in the
 *   report's categories.
 *
 * @module
 */
export * from "./snapshot.ts";
export * from "./memory_categories.ts";
export * from "./execution_outcomes.ts";
export * from "./neuron_ls.ts";
export * from "./neuron_monitor_config.ts";
export * from "./neuron_monitor.ts";
