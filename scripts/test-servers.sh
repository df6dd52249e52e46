#!/usr/bin/env bash
# Installs the object-store test servers the integration tests start on loopback (npm packages
# at the versions pinned below) into a cache outside the checkout, $ETCDBR_NPM_CACHE (default
# ~/.cache/etcdbr/npm), only when missing. Needs Node.js >= 20 and npm; without them it says so
# and exits 0, and the tests that need a server skip (or fail under ETCDBR_REQUIRE_TOOLS=1).
set -euo pipefail
CACHE=${ETCDBR_NPM_CACHE:-$HOME/.cache/etcdbr/npm}
# name@version; the directory under node_modules that proves it is installed
PKGS=("@20minutes/s3rver@4.0.4" "azurite@3.35.0")
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "test-servers: node/npm not found: object-store integration tests will skip" >&2
    exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
    echo "test-servers: node $(node --version) is older than 20 (@20minutes/s3rver 4.0.4 needs >= 20): object-store tests will skip" >&2
    exit 0
fi
mkdir -p "$CACHE"
missing=0
for spec in "${PKGS[@]}"; do
    name=${spec%@*}
    want=${spec##*@}
    have=$(node -p "try { require('$CACHE/node_modules/$name/package.json').version } catch (e) { '' }")
    [ "$have" = "$want" ] || missing=1
done
if [ "$missing" = 1 ]; then
    # all of them in one install, recorded in the cache's own package.json, so none is pruned
    echo "== npm install ${PKGS[*]} into $CACHE"
    [ -f "$CACHE/package.json" ] || echo '{"private": true}' >"$CACHE/package.json"
    # a transient registry or network error is retried (3 tries, 10 s apart)
    for try in 1 2 3; do
        if npm install --no-audit --no-fund --prefix "$CACHE" "${PKGS[@]}" >/dev/null; then break; fi
        [ "$try" = 3 ] && { echo "test-servers: npm install failed 3 times" >&2; exit 1; }
        echo "test-servers: npm install failed (try $try); retrying in 10 s" >&2
        sleep 10
    done
fi
