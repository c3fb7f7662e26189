import Foundation
import LocalStore

/// A failed conformance expectation: what went wrong and where in the suite.
///
/// Checks throw this error (through ``expect(_:_:fileID:filePath:line:)`` and its siblings) instead of
/// using a test framework, so the suite runs under Swift Testing, XCTest or a plain executable.
public struct ConformanceFailure: Error, Sendable, CustomStringConvertible {
    /// What was expected and what happened instead.
    public var message: String
    /// The `#fileID` of the failed expectation (`Module/File.swift`).
    public var fileID: String
    /// The `#filePath` of the failed expectation.
    public var filePath: String
    /// The line of the failed expectation.
    public var line: Int

    /// Creates a failure located at the caller.
    public init(_ message: String, fileID: String = #fileID, filePath: String = #filePath, line: Int = #line) {
        self.message = message
        self.fileID = fileID
        self.filePath = filePath
        self.line = line
    }

    /// `File.swift:line: message`.
    public var description: String { "\(fileID):\(line): \(message)" }
}

/// Throws a ``ConformanceFailure`` with `message` unless `condition` holds.
public func expect(
    _ condition: Bool, _ message: @autoclosure () -> String = "expectation failed",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws {
    if !condition { throw ConformanceFailure(message(), fileID: fileID, filePath: filePath, line: line) }
}

/// Throws a ``ConformanceFailure`` unless `actual == expected`.
public func expectEqual<T: Equatable>(
    _ actual: T, _ expected: T, _ message: @autoclosure () -> String = "",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws {
    if actual != expected {
        let context = message()
        throw ConformanceFailure(
            (context.isEmpty ? "" : context + ": ") + "expected \(abbreviated(expected)), got \(abbreviated(actual))",
            fileID: fileID, filePath: filePath, line: line)
    }
}

/// Throws a ``ConformanceFailure`` unless `value` is `nil`.
public func expectNil<T>(
    _ value: T?, _ message: @autoclosure () -> String = "",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws {
    if let value {
        let context = message()
        throw ConformanceFailure(
            (context.isEmpty ? "" : context + ": ") + "expected nil, got \(abbreviated(value))",
            fileID: fileID, filePath: filePath, line: line)
    }
}

/// Returns the wrapped value, or throws a ``ConformanceFailure`` when `value` is `nil`.
public func unwrap<T>(
    _ value: T?, _ message: @autoclosure () -> String = "unexpected nil",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws -> T {
    guard let value else { throw ConformanceFailure(message(), fileID: fileID, filePath: filePath, line: line) }
    return value
}

/// Runs `body` and checks that it throws a `LocalStoreError` whose code is `code`; returns that error.
///
/// Succeeding, throwing another type of error, or throwing another code is a ``ConformanceFailure``.
@discardableResult
public func expectThrows<R>(
    code: LocalStoreError.Code, _ message: @autoclosure () -> String = "",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line,
    _ body: () throws -> R
) throws -> LocalStoreError {
    let context = message()
    let prefix = context.isEmpty ? "" : context + ": "
    let result: R
    do {
        result = try body()
    } catch let error as LocalStoreError {
        guard error.code == code else {
            throw ConformanceFailure(
                prefix + "expected a '\(code)' error, got '\(error.code)': \(abbreviated(error.message))",
                fileID: fileID, filePath: filePath, line: line)
        }
        return error
    } catch {
        throw ConformanceFailure(
            prefix + "expected a LocalStoreError '\(code)', got \(type(of: error)): \(abbreviated(error))",
            fileID: fileID, filePath: filePath, line: line)
    }
    throw ConformanceFailure(
        prefix + "expected a '\(code)' error, but the call succeeded" + (R.self == Void.self ? "" : " with \(abbreviated(result))"),
        fileID: fileID, filePath: filePath, line: line)
}

/// `String(describing:)` cut to a readable length (a 1 MB string must not flood a test log).
func abbreviated(_ value: Any, limit: Int = 600) -> String {
    let text = String(describing: value)
    guard text.count > limit else { return text }
    return String(text.prefix(limit)) + "… (\(text.utf8.count) bytes)"
}

// MARK: - Exact comparisons

/// Exact identity of values: strings by UTF-8 bytes (Swift's `==` on strings uses canonical
/// equivalence), doubles and dates by bit pattern, json recursively the same way.
func identical(_ a: Value, _ b: Value) -> Bool {
    switch (a, b) {
    case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
    case (.date(let x), .date(let y)):
        return x.timeIntervalSinceReferenceDate.bitPattern == y.timeIntervalSinceReferenceDate.bitPattern
    case (.json(let x), .json(let y)): return identical(x, y)
    default: return a == b
    }
}

/// Exact identity of json documents (object key order ignored).
func identical(_ a: JSON, _ b: JSON) -> Bool {
    switch (a, b) {
    case (.string(let x), .string(let y)): return x.utf8.elementsEqual(y.utf8)
    case (.double(let x), .double(let y)): return x.bitPattern == y.bitPattern
    case (.array(let x), .array(let y)):
        return x.count == y.count && zip(x, y).allSatisfy { identical($0, $1) }
    case (.object(let x), .object(let y)):
        guard x.count == y.count else { return false }
        for (k, v) in x {
            guard let w = y.first(where: { $0.key.utf8.elementsEqual(k.utf8) })?.value, identical(v, w) else { return false }
        }
        return true
    default: return a == b
    }
}

/// Exact identity of items: the same keys (by bytes) with identical values.
func identical(_ a: Item, _ b: Item) -> Bool {
    guard a.count == b.count else { return false }
    for (k, v) in a.values {
        guard let w = b[k], identical(v, w) else { return false }
    }
    return true
}

/// Throws unless `actual` is exactly `expected` (see ``identical(_:_:)-Value``).
func expectIdentical(
    _ actual: Value?, _ expected: Value, _ message: @autoclosure () -> String = "",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws {
    guard let actual, identical(actual, expected) else {
        let context = message()
        throw ConformanceFailure(
            (context.isEmpty ? "" : context + ": ") + "expected exactly \(render(expected)), got \(actual.map(render) ?? "no value")",
            fileID: fileID, filePath: filePath, line: line)
    }
}

/// Throws unless the item is exactly `expected`.
func expectIdentical(
    _ actual: Item?, _ expected: Item, _ message: @autoclosure () -> String = "",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws {
    guard let actual, identical(actual, expected) else {
        let context = message()
        throw ConformanceFailure(
            (context.isEmpty ? "" : context + ": ") + "expected exactly \(abbreviated(expected)), got \(actual.map { abbreviated($0) } ?? "nil")",
            fileID: fileID, filePath: filePath, line: line)
    }
}

/// Throws unless the two id lists are equal element by element, by UTF-8 bytes.
func expectSameIds(
    _ actual: [String], _ expected: [String], _ message: @autoclosure () -> String = "",
    fileID: String = #fileID, filePath: String = #filePath, line: Int = #line
) throws {
    let same = actual.count == expected.count && zip(actual, expected).allSatisfy { $0.utf8.elementsEqual($1.utf8) }
    if !same {
        let context = message()
        throw ConformanceFailure(
            (context.isEmpty ? "" : context + ": ") + "expected ids \(abbreviated(expected.map(debugText))), got \(abbreviated(actual.map(debugText)))",
            fileID: fileID, filePath: filePath, line: line)
    }
}

/// A value rendered with its bit pattern when that matters.
func render(_ v: Value) -> String {
    switch v {
    case .double(let d): return "double(\(d), bits \(String(d.bitPattern, radix: 16)))"
    case .date(let d): return "date(\(d.timeIntervalSinceReferenceDate) since 2001)"
    case .string(let s): return "string(\(abbreviated(debugText(s), limit: 200)))"
    default: return abbreviated(v)
    }
}

/// A string with control characters escaped.
func debugText(_ s: String) -> String {
    var out = ""
    for scalar in s.unicodeScalars {
        if scalar.value < 0x20 || scalar.value == 0x7F {
            out += "\\u{\(String(scalar.value, radix: 16))}"
        } else {
            out.unicodeScalars.append(scalar)
        }
    }
    return out
}
