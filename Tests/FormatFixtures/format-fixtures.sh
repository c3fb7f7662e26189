#!/usr/bin/env bash
# Writes the on-disk format fixtures in Tests/FormatFixtures/NAME/ (docs/format.md, "Fixtures").
#
#   Tests/FormatFixtures/format-fixtures.sh NAME [COMMIT]
#   Tests/FormatFixtures/format-fixtures.sh --open NAME FIXTURES   # how NAME's code reacts to Tests/FormatFixtures/FIXTURES
#
# NAME is the fixture directory (e.g. v0.1.0); COMMIT is the git commit whose code writes the stores
# (default: the working tree). The script copies that tree to .build-fixtures/NAME/src, adds the
# executable target FormatFixtureWriter (Tests/FormatFixtures/Writer/main.swift, taken from the working
# tree) to its Package.swift, builds it there (debug, its own scratch path) and runs it.
# Compilation conditions tell the writer which features the tree has (COMPOUND_INDEXES).
set -euo pipefail
root=$(git rev-parse --show-toplevel)
if [ "${1:-}" = "--open" ]; then
    [ $# -eq 3 ] || { echo "usage: $0 --open NAME FIXTURES" >&2; exit 64; }
    exec "$root/.build-fixtures/$2/build/debug/FormatFixtureWriter" --open "$root/Tests/FormatFixtures/$3"
fi
[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $0 NAME [COMMIT]" >&2; exit 64; }
name=$1
commit=${2:-}
work="$root/.build-fixtures/$name"
src="$work/src"
# Extracted over an earlier copy (not removed first), so that an unchanged tree is not rebuilt.
mkdir -p "$src"
if [ -n "$commit" ]; then
    git -C "$root" archive "$commit" | tar -x -C "$src"
else
    tar -C "$root" --exclude='./.build*' --exclude=./.git --exclude=./Tests/FormatFixtures -c . | tar -x -C "$src"
fi
[ -f "$root/Package.resolved" ] && [ ! -f "$src/Package.resolved" ] && cp "$root/Package.resolved" "$src/"
mkdir -p "$src/FormatFixtureWriter"
cp "$root/Tests/FormatFixtures/Writer/main.swift" "$src/FormatFixtureWriter/main.swift"
defines=""
grep -q "struct TableIndex" "$src/Sources/LocalStore/Schema.swift" && defines+='.define("COMPOUND_INDEXES"),'
cat >> "$src/Package.swift" <<SWIFT

// Added by Tests/FormatFixtures/format-fixtures.sh.
package.targets.append(
    .executableTarget(
        name: "FormatFixtureWriter", dependencies: ["LocalStore", "LocalStoreSQLite", "LocalStoreSQLCipher", "LocalStoreLMDB"],
        path: "FormatFixtureWriter", swiftSettings: [$defines]))
package.products.append(.executable(name: "FormatFixtureWriter", targets: ["FormatFixtureWriter"]))
SWIFT
(cd "$src" && swift build --product FormatFixtureWriter --scratch-path "$work/build" 2>&1 | tail -5)
"$work/build/debug/FormatFixtureWriter" "$root/Tests/FormatFixtures/$name"
if [ -n "$commit" ]; then
    echo "$commit" > "$root/Tests/FormatFixtures/$name/WRITTEN-BY"
else
    echo "$(git -C "$root" rev-parse HEAD) (working tree)" > "$root/Tests/FormatFixtures/$name/WRITTEN-BY"
fi
ls -la "$root/Tests/FormatFixtures/$name" "$root/Tests/FormatFixtures/$name/lmdb"
