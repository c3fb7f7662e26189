/// Numbers as .NET (Core 3.0 and later) writes them with `ToString(CultureInfo.InvariantCulture)`: the
/// text the string functions read from a number argument (`concat(name,2.5)` is `name` + `"2.5"`), as
/// the services' .NET servers convert it. Shared by the core evaluator and the SQL engine's
/// `localstore_text`, so every backend gives the same text.
package enum DotNetText {
    /// A double as .NET's `Double.ToString(CultureInfo.InvariantCulture)` ("G", shortest round-trip):
    /// the shortest digits that read back as the same double; in positional notation when the decimal
    /// exponent `e` (the number is `d.ddd × 10^e`) satisfies −4 ≤ `e` < max(15, number of digits), otherwise
    /// `d.dddE+XX` with a signed exponent of at least two digits. `-0` keeps its sign; the non-finite
    /// values are `NaN`, `Infinity`, `-Infinity`.
    ///
    /// `1.0` → `1`, `0.1` → `0.1`, `-2.5` → `-2.5`, `1e14` → `100000000000000`, `1e15` → `1E+15`,
    /// `0.0001` → `0.0001`, `0.00001` → `1E-05`, `1.0 / 3` → `0.3333333333333333`.
    package static func double(_ d: Double) -> String {
        if d.isNaN { return "NaN" }
        if d.isInfinite { return d < 0 ? "-Infinity" : "Infinity" }
        let sign = d.sign == .minus ? "-" : ""
        // Swift's description is the shortest round-trip digits too ("1e-05", "0.1", "1.2345e+20"):
        // read its digits and where the decimal point falls.
        let text = Array(d.magnitude.description.utf8)
        var mantissa = text[...]
        var exponent = 0
        if let e = text.firstIndex(where: { $0 == UInt8(ascii: "e") || $0 == UInt8(ascii: "E") }) {
            mantissa = text[..<e]
            exponent = Int(String(decoding: text[(e + 1)...], as: UTF8.self)) ?? 0
        }
        var digits: [UInt8] = []
        var point = mantissa.count
        for (i, c) in mantissa.enumerated() {
            if c == UInt8(ascii: ".") { point = i } else { digits.append(c) }
        }
        // The number is 0.d1d2… × 10^scale.
        var scale = point + exponent
        while digits.first == UInt8(ascii: "0") {
            digits.removeFirst()
            scale -= 1
        }
        while digits.last == UInt8(ascii: "0") { digits.removeLast() }
        if digits.isEmpty { return sign + "0" }
        var out = sign
        if scale > max(digits.count, 15) || scale < -3 {
            out.unicodeScalars.append(Unicode.Scalar(digits[0]))
            if digits.count > 1 { out += "." + String(decoding: digits[1...], as: UTF8.self) }
            let e = scale - 1
            let magnitude = String(abs(e))
            out += (e < 0 ? "E-" : "E+") + (magnitude.count < 2 ? "0" : "") + magnitude
        } else if scale > 0 {
            let whole = min(scale, digits.count)
            out += String(decoding: digits[..<whole], as: UTF8.self)
            if scale > digits.count { out += String(repeating: "0", count: scale - digits.count) }
            if digits.count > scale { out += "." + String(decoding: digits[scale...], as: UTF8.self) }
        } else {
            out += "0." + String(repeating: "0", count: -scale) + String(decoding: digits, as: UTF8.self)
        }
        return out
    }
}
