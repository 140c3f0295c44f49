#!/usr/bin/env bash
# Consumer smoke test (every workspace package: packages/* and kernels/ops): copies tests/consumer/app.ts into a scratch folder OUTSIDE the workspace and runs it
#  - under Deno with an import map that resolves the packages the way their deno.json files declare (JSR style),
#  - under Bun with a package.json that installs the packages from their folders (npm style),
# both with default compiler options. Prints one line per runtime; exits non-zero on failure.
set -euo pipefail
root="$(cd "$(dirname "$0")/../.." && pwd)"
bin="$root/node_modules/.bin"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
wasm="$root/kernels/wasm/vector_add.wasm"

mkdir -p "$scratch/deno" "$scratch/bun"
cp "$root/tests/consumer/app.ts" "$scratch/deno/app.ts"
cp "$root/tests/consumer/app.ts" "$scratch/bun/app.ts"

# Deno: an import map like the one a JSR install produces (each package's own npm imports included).
node -e '
const fs = require("fs"), path = require("path");
const root = process.argv[1], out = process.argv[2];
const imports = {};
const dirs = fs.readdirSync(path.join(root, "packages")).map((p) => path.join(root, "packages", p)).concat([path.join(root, "kernels", "ops")]);
for (const dir of dirs) {
  const cfg = JSON.parse(fs.readFileSync(path.join(dir, "deno.json"), "utf8"));
  const exp = typeof cfg.exports === "string" ? { ".": cfg.exports } : cfg.exports;
  for (const [k, v] of Object.entries(exp)) imports[cfg.name + k.slice(1)] = path.join(dir, v);
  Object.assign(imports, cfg.imports ?? {});
}
fs.writeFileSync(path.join(out, "deno.json"), JSON.stringify({ imports }, null, 2));
' "$root" "$scratch/deno"
(cd "$scratch/deno" && "$bin/deno" run -A --quiet app.ts "$wasm")

# Bun: the packages installed from their folders, as npm dependencies.
node -e '
const fs = require("fs"), path = require("path");
const root = process.argv[1], out = process.argv[2];
const deps = {};
const dirs = fs.readdirSync(path.join(root, "packages")).map((p) => path.join(root, "packages", p)).concat([path.join(root, "kernels", "ops")]);
for (const dir of dirs) {
  const pkg = JSON.parse(fs.readFileSync(path.join(dir, "package.json"), "utf8"));
  deps[pkg.name] = "file:" + dir;
}
const rootPkg = JSON.parse(fs.readFileSync(path.join(root, "package.json"), "utf8"));
Object.assign(deps, rootPkg.dependencies);
const overrides = Object.fromEntries(Object.entries(deps).filter(([k]) => k.startsWith("@nrt/")));
fs.writeFileSync(path.join(out, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module", dependencies: deps, overrides }, null, 2));
' "$root" "$scratch/bun"
(cd "$scratch/bun" && "$bin/bun" install --silent >/dev/null && "$bin/bun" app.ts "$wasm")
