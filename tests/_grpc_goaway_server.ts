/**
 * A gRPC server over the test models, as `createGrpcInferenceServer` makes it by default under the runtime that runs
 * this file (under Deno: behind the GOAWAY relay); prints `PORT <n>` and serves until killed. For
 * grpc_deno_goaway_test.ts.
 */
import { createGrpcInferenceServer } from "../packages/grpc-api/mod.ts";
import { httpFixture } from "./_http.ts";

const fx = await httpFixture();
const server = createGrpcInferenceServer({ runtime: fx.runtime, repository: fx.repository });
console.log(`PORT ${(await server.listen("127.0.0.1", 0)).port}`);
