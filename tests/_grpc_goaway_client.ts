/**
 * `CONNECTIONS` grpc-js channels to `127.0.0.1:PORT` one after the other, each making two relu ModelInfer calls and
 * closing (which sends a GOAWAY); exits 0 when every answer was right. For grpc_deno_goaway_test.ts.
 */
import process from "node:process";
import { oipClient } from "./_grpc_client.ts";

const [port, connections] = process.argv.slice(2).map(Number);
const relu = {
  model_name: "relu",
  inputs: [{ name: "x", datatype: "FP32", shape: [8], contents: { fp32_contents: [1, -1, 2, -2, 3, -3, 4, -4] } }],
};
for (let i = 0; i < connections; i++) {
  const client = oipClient(`127.0.0.1:${port}`);
  for (let k = 0; k < 2; k++) {
    const answer = await client.modelInfer(relu);
    if (JSON.stringify(answer.outputs[0].contents.fp32_contents) !== "[1,0,2,0,3,0,4,0]") {
      throw new Error(`Wrong answer: ${JSON.stringify(answer)}`);
    }
  }
  client.close();
}
console.log("done");
