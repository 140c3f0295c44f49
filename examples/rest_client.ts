/**
 * A REST client with nothing but `fetch`, against the Open Inference Protocol v2 server (`npm start`, or
 * `npx nrt serve --models DIR`). Run with `bun examples/rest_client.ts [URL]` or
 * `deno run -A examples/rest_client.ts [URL]` (default http://127.0.0.1:8000).
 *
 * @module
 */

/** Lists the models, reads one's metadata and runs an inference on it; returns the output tensor. */
export async function main(
  base = "http://127.0.0.1:8000",
  log: (s: string) => void = console.log,
): Promise<{ name: string; data: number[] }> {
  const get = async (path: string, init?: RequestInit) => {
    const res = await fetch(new URL(path, base), init);
    const body = await res.json();
    if (!res.ok) throw new Error(`${init?.method ?? "GET"} ${path}: ${res.status} ${body.error}`);
    return body;
  };
  log(`server: ${JSON.stringify(await get("/v2"))}`);
  const index: Array<{ name: string; state: string }> = await get("/v2/repository/index", {
    method: "POST",
    body: "{}",
  });
  const name = index.find((m) => m.state === "READY")?.name ?? index[0]?.name;
  if (name === undefined) throw new Error("The server has no models");
  const meta = await get(`/v2/models/${name}`);
  log(`model ${name}: inputs ${JSON.stringify(meta.inputs)}`);
  const inputs = meta.inputs.map((t: { name: string; datatype: string; shape: number[] }) => {
    const n = t.shape.reduce((a, b) => a * b, 1);
    return {
      name: t.name,
      datatype: t.datatype,
      shape: t.shape,
      data: Array.from({ length: n }, (_, i) => (i % 7) - 3),
    };
  });
  const result = await get(`/v2/models/${name}/infer`, {
    method: "POST",
    body: JSON.stringify({ id: "example-1", inputs }),
  });
  log(`infer ${result.id}: ${result.outputs[0].name} = ${JSON.stringify(result.outputs[0].data.slice(0, 8))}…`);
  return { name: result.outputs[0].name, data: result.outputs[0].data };
}

if (import.meta.main) {
  const g = globalThis as { Deno?: { args: string[] }; process?: { argv: string[] } };
  await main((g.Deno ? g.Deno.args : g.process!.argv.slice(2))[0]);
}
