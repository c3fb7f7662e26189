#!/usr/bin/env bash
# `make sanitize`: the whole test suite under each sanitizer in SANITIZERS (thread, address), each built into
# its own scratch folder (.build-tsan, .build-asan). docs/reliability.md, "Sanitizers", says what runs where.
#
# The suite runs one batch per test target (`--filter '^Target\.'`), so a batch that hangs or crashes is
# named, and its log (in <scratch>/sanitize-logs/) holds only its own tests. Every batch must end with the
# test runner's "passed" line, having run at least one test (the count is printed beside the number of
# tests `swift test list` gives for the target); a batch still running after
# SANITIZE_BATCH_TIMEOUT seconds gets its threads' stacks printed by gdb (when installed) and is killed.
# Any sanitizer report in any log fails the run, as does a failed test. The totals are printed at the end.
set -u -o pipefail

SWIFT=${SWIFT:-swift}
SANITIZERS=${SANITIZERS:-thread address}
SANITIZE_FILTER=${SANITIZE_FILTER:-}
SANITIZE_BATCH_TIMEOUT=${SANITIZE_BATCH_TIMEOUT:-2700}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"

# A crashing helper process would otherwise run swift-backtrace, which does not work inside a TSan process
# (it hangs the crashing child; the crash tests provoke crashes on purpose).
export SWIFT_BACKTRACE=enable=no
export TSAN_OPTIONS="halt_on_error=0 exitcode=66 suppressions=$ROOT/Tests/Sanitizers/tsan-suppressions.txt ${TSAN_OPTIONS:-}"
export ASAN_OPTIONS="detect_leaks=1 ${ASAN_OPTIONS:-}"
# LeakSanitizer (part of AddressSanitizer) checks every test process at its exit; its suppressions say why
# each entry is not a leak of ours.
export LSAN_OPTIONS="suppressions=$ROOT/Tests/Sanitizers/lsan-suppressions.txt ${LSAN_OPTIONS:-}"

status=0
summary=()
for s in $SANITIZERS; do
    case $s in thread) dir=.build-tsan ;; address) dir=.build-asan ;; *) dir=.build-$s ;; esac
    echo "== make sanitize: $s =="
    if ! $SWIFT build --build-tests --sanitize="$s" --scratch-path "$dir"; then
        echo "== make sanitize: $s build FAILED =="
        status=1
        summary+=("$s: build failed")
        continue
    fi
    logs=$dir/sanitize-logs
    rm -rf "$logs" && mkdir -p "$logs"
    # Every test of the suite, as "Target.Suite/test()": the batches are its targets.
    if ! $SWIFT test list --skip-build --sanitize="$s" --scratch-path "$dir" >"$logs/list.txt" 2>"$logs/list.err"; then
        cat "$logs/list.err"
        echo "== make sanitize: $s: cannot list the tests =="
        status=1
        summary+=("$s: cannot list the tests")
        continue
    fi
    targets=$(sed -n 's/^\([A-Za-z0-9_]*\)\..*/\1/p' "$logs/list.txt" | sort -u)
    ran=0
    reports=0
    failed=()
    started=$(date +%s)
    for t in $targets; do
        filter="^$t\\."
        [ -n "$SANITIZE_FILTER" ] && filter="^$t\\..*($SANITIZE_FILTER)"
        listed=$(grep -c -E "$filter" "$logs/list.txt")
        [ "$listed" -eq 0 ] && continue
        log=$logs/$t.log
        echo "-- $s: $t ($(date -u +%H:%M:%S))"
        $SWIFT test --skip-build --sanitize="$s" --scratch-path "$dir" --filter "$filter" >"$log" 2>&1 &
        pid=$!
        deadline=$(($(date +%s) + SANITIZE_BATCH_TIMEOUT))
        while kill -0 "$pid" 2>/dev/null && [ "$(date +%s)" -lt "$deadline" ]; do sleep 2; done
        if kill -0 "$pid" 2>/dev/null; then
            echo "   $t: still running after ${SANITIZE_BATCH_TIMEOUT} s; stacks in $log"
            for p in $(pgrep -P "$pid"; pgrep -f "$dir/.*xctest" || true); do
                if command -v gdb >/dev/null; then
                    echo "== stacks of $p ($(tr '\0' ' ' </proc/$p/cmdline 2>/dev/null | cut -c1-200)) ==" >>"$log"
                    gdb -p "$p" -batch -ex "thread apply all bt" >>"$log" 2>&1 || true
                fi
            done
            pkill -KILL -P "$pid" 2>/dev/null
            kill -KILL "$pid" 2>/dev/null
            wait "$pid" 2>/dev/null
            failed+=("$t (timed out)")
            continue
        fi
        wait "$pid"
        rc=$?
        n=$(grep -c -E 'WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer|runtime error:' "$log")
        reports=$((reports + n))
        # swift-testing: "Test run with N tests in M suites passed"; XCTest: "Executed N tests, with 0 failures".
        count=$(sed -n 's/.*Test run with \([0-9]*\) tests\{0,1\} .*passed.*/\1/p' "$log" | tail -1)
        xcount=$(sed -n 's/.*Executed \([0-9]*\) tests\{0,1\}, with 0 failures.*/\1/p' "$log" | tail -1)
        count=$(( ${count:-0} + ${xcount:-0} ))
        ran=$((ran + count))
        echo "   $t: exit $rc, $count of $listed tests passed (skipped ones included), $n sanitizer reports"
        if [ "$rc" -ne 0 ] || [ "$count" -eq 0 ] || [ "$n" -ne 0 ]; then
            failed+=("$t (exit $rc, $count tests passed, $n reports)")
            grep -E '✘|error:|WARNING: ThreadSanitizer|ERROR: AddressSanitizer|ERROR: LeakSanitizer|SUMMARY: ' "$log" | head -20
        fi
    done
    took=$(($(date +%s) - started))
    line="$s: $ran tests passed in $took s, $reports sanitizer reports"
    if [ ${#failed[@]} -ne 0 ]; then
        status=1
        line="$line; FAILED: ${failed[*]}"
    fi
    echo "== make sanitize: $line (logs in $logs) =="
    summary+=("$line")
done
echo
echo "== make sanitize: totals =="
printf '%s\n' "${summary[@]}"
exit $status
