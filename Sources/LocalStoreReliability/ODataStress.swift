import Foundation
import LocalStore

/// Filter texts that stress the OData parser's bounds (docs/reliability.md, "Hostile input"): long flat
/// chains, deep nesting, long arithmetic chains and long literals, parsed by every entry point.
public enum ODataStress {
    /// The shapes: `or-chain` and `and-chain` (`n` comparisons), `nesting` (`n` parentheses),
    /// `not-nesting` (`n` nots), `arithmetic` (`n` additions), `literal` (a string of `n` bytes),
    /// `in-list` (an OData v4 `in` list of `n` values), `cast-chain` (`n` v4 `cast(…,Edm.Date)`
    /// comparisons joined by `or`).
    public static let shapes = ["or-chain", "and-chain", "nesting", "not-nesting", "arithmetic", "literal", "in-list", "cast-chain"]

    /// The `$filter` text of `shape` with size `n`.
    public static func filter(_ shape: String, _ n: Int) -> String {
        switch shape {
        case "or-chain", "and-chain":
            let term = "id eq 'a'"
            let joiner = shape == "or-chain" ? " or " : " and "
            var out = term
            out.reserveCapacity(n * (term.utf8.count + joiner.utf8.count))
            for _ in 1..<max(1, n) { out += joiner + term }
            return out
        case "nesting": return String(repeating: "(", count: n) + "id eq 'a'" + String(repeating: ")", count: n)
        case "not-nesting": return String(repeating: "not ", count: n) + "done"
        case "arithmetic": return "n" + String(repeating: " add 1", count: n) + " eq 1"
        case "in-list": return "n in (" + Array(repeating: "1", count: max(1, n)).joined(separator: ",") + ")"
        case "cast-chain": return Array(repeating: "d eq cast(1994-10-14,Edm.Date)", count: max(1, n)).joined(separator: " or ")
        default: return "id eq '" + String(repeating: "x", count: n) + "'"
        }
    }

    /// Parses `shape`'s text with `OData.parseFilter`, `OData.parseQuery` and `PullRequest.parse`,
    /// reporting each outcome (`ok` or the error's code) with `say`, then `done`.
    public static func exercise(_ shape: String, _ n: Int, say: (String) -> Void) {
        let text = filter(shape, n)
        say("built \(text.utf8.count) bytes")
        func outcome(_ body: () throws -> Void) -> String {
            do {
                try body()
                return "ok"
            } catch let e as LocalStoreError {
                return "\(e.code): \(e.message.prefix(120))"
            } catch {
                return "other: \(error)"
            }
        }
        say("filter \(outcome { _ = try OData.parseFilter(text) })")
        let encoded = "$filter=" + (text.addingPercentEncoding(withAllowedCharacters: .alphanumerics) ?? text)
        say("query \(outcome { _ = try OData.parseQuery(encoded, table: "T") })")
        say("pull \(outcome { _ = try PullRequest.parse(encoded + "&__includeDeleted=true", table: "T") })")
        say("done")
    }
}

/// A value a thread hands back.
final class ThreadResult<T: Sendable>: @unchecked Sendable {
    var value: T?
}

/// Runs a closure on a new thread with a given stack size and waits for its result.
public enum OnThread {
    /// `body`'s result, computed on a thread whose stack is `stackKiB` KiB (`nil` only if the thread
    /// could not deliver it).
    public static func run<T: Sendable>(stackKiB: Int, _ body: @escaping @Sendable () -> T) -> T? {
        let result = ThreadResult<T>()
        let done = DispatchSemaphore(value: 0)
        let thread = Thread {
            result.value = body()
            done.signal()
        }
        thread.stackSize = stackKiB << 10
        thread.start()
        done.wait()
        return result.value
    }
}
