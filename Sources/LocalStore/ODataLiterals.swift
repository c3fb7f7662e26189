import Foundation

/// The OData v4 date forms: `Edm.Date` days and `Edm.DateTimeOffset` instants written without quotes.
enum ODataDates {
    /// `yyyy-MM-dd` of `date` when it is a midnight UTC of the years 0000 to 9999; `nil` otherwise.
    static func day(of date: Date) -> String? {
        // 2001-01-01 is a midnight UTC, so whole days from it are exactly the midnights.
        guard isDay(date) else { return nil }
        return String(DeltaTokenFormat.string(from: date).prefix(10))
    }

    /// Whether `date` is a midnight UTC of the years 0000 to 9999 (what ``day(of:)`` writes).
    static func isDay(_ date: Date) -> Bool {
        let t = date.timeIntervalSinceReferenceDate
        return t.isFinite && t.truncatingRemainder(dividingBy: 86_400) == 0 && DeltaTokenFormat.isStorable(date)
    }

    static func isLeapYear(_ y: Int) -> Bool { (y % 4 == 0 && y % 100 != 0) || y % 400 == 0 }

    static func daysInMonth(_ m: Int, of y: Int) -> Int {
        switch m {
        case 2: return isLeapYear(y) ? 29 : 28
        case 4, 6, 9, 11: return 30
        default: return 31
        }
    }

    /// The value of `digits` decimal digits of `b` at `at`, or `nil`.
    private static func number(_ b: [UInt8], _ at: Int, _ digits: Int) -> Int? {
        guard at + digits <= b.count else { return nil }
        var v = 0
        for i in at..<(at + digits) {
            guard b[i] >= 0x30, b[i] <= 0x39 else { return nil }
            v = v * 10 + Int(b[i] - 0x30)
        }
        return v
    }

    /// The year, month and day of `yyyy-MM-dd` at the start of `b`, checked against the calendar.
    private static func calendarDay(_ b: [UInt8]) -> (Int, Int, Int)? {
        guard b.count >= 10, b[4] == UInt8(ascii: "-"), b[7] == UInt8(ascii: "-"), let y = number(b, 0, 4),
            let m = number(b, 5, 2), let d = number(b, 8, 2), (1...12).contains(m), d >= 1, d <= daysInMonth(m, of: y)
        else { return nil }
        return (y, m, d)
    }

    /// The midnight UTC of an `Edm.Date` (`yyyy-MM-dd`, a day that exists, years 0000 to 9999); `nil`
    /// for anything else.
    static func date(fromDay text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count == 10, let (y, m, d) = calendarDay(b) else { return nil }
        return Date(timeIntervalSince1970: Double(DeltaTokenFormat.daysFromCivil(y, m, d) * 86_400))
    }

    /// An `Edm.DateTimeOffset` written bare: `yyyy-MM-ddTHH:mm[:ss[.fraction]]` then `Z` or `±hh:mm`, a
    /// day that exists, hours 0–23, minutes and seconds 0–59; `nil` for anything else. The UTC forms
    /// with seconds give exactly the date `datetimeoffset'…'` gives for the same text.
    static func date(fromDateTime text: String) -> Date? {
        let b = Array(text.utf8)
        guard b.count >= 17, calendarDay(b) != nil, b[10] == UInt8(ascii: "T"), let h = number(b, 11, 2), h < 24,
            b[13] == UInt8(ascii: ":"), let mi = number(b, 14, 2), mi < 60
        else { return nil }
        var i = 16
        var seconds = "00"
        var fraction = ""
        if b[i] == UInt8(ascii: ":") {
            guard let s = number(b, i + 1, 2), s < 60 else { return nil }
            seconds = String(decoding: b[(i + 1)..<(i + 3)], as: UTF8.self)
            i += 3
            if i < b.count, b[i] == UInt8(ascii: ".") {
                var j = i + 1
                while j < b.count, b[j] >= 0x30, b[j] <= 0x39 { j += 1 }
                guard j > i + 1 else { return nil }
                fraction = String(decoding: b[i..<j], as: UTF8.self)
                i = j
            }
        }
        // The zone: Z, or an offset ±hh:mm (hours 0–23) subtracted to give UTC.
        var offset = 0
        guard i < b.count else { return nil }
        if b[i] == UInt8(ascii: "Z") {
            guard i + 1 == b.count else { return nil }
        } else if b[i] == UInt8(ascii: "+") || b[i] == UInt8(ascii: "-") {
            guard i + 6 == b.count, let oh = number(b, i + 1, 2), oh < 24, b[i + 3] == UInt8(ascii: ":"),
                let om = number(b, i + 4, 2), om < 60
            else { return nil }
            offset = (oh * 60 + om) * 60 * (b[i] == UInt8(ascii: "-") ? -1 : 1)
        } else {
            return nil
        }
        let utc = String(decoding: b[0..<16], as: UTF8.self) + ":" + seconds + fraction + "Z"
        guard let date = DeltaTokenFormat.date(from: utc) else { return nil }
        return offset == 0 ? date : date.addingTimeInterval(Double(-offset))
    }
}

/// Base64url without padding (RFC 4648 §5), the text of an OData v4 `binary'…'` literal.
enum Base64URL {
    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

    static func encode(_ bytes: [UInt8]) -> String {
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var i = 0
        while i < bytes.count {
            let n = min(3, bytes.count - i)
            var word = UInt32(bytes[i]) << 16
            if n > 1 { word |= UInt32(bytes[i + 1]) << 8 }
            if n > 2 { word |= UInt32(bytes[i + 2]) }
            for k in 0...n { out.append(alphabet[Int((word >> UInt32(18 - 6 * k)) & 63)]) }
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }

    private static func sextet(_ c: UInt8) -> UInt32? {
        switch c {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"): return UInt32(c - UInt8(ascii: "A"))
        case UInt8(ascii: "a")...UInt8(ascii: "z"): return UInt32(c - UInt8(ascii: "a") + 26)
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return UInt32(c - UInt8(ascii: "0") + 52)
        case UInt8(ascii: "-"): return 62
        case UInt8(ascii: "_"): return 63
        default: return nil
        }
    }

    /// The bytes of base64url text, with or without `=` padding; `nil` for any other character, a
    /// length no encoding has, or bits left over after the last byte (each value has one spelling).
    static func decode(_ text: String) -> [UInt8]? {
        var u = Array(text.utf8)
        if u.count % 4 == 0 {
            var pad = 0
            while pad < 2, u.last == UInt8(ascii: "=") {
                u.removeLast()
                pad += 1
            }
        }
        guard u.count % 4 != 1 else { return nil }
        var out: [UInt8] = []
        out.reserveCapacity(u.count * 3 / 4)
        var i = 0
        while i < u.count {
            let n = min(4, u.count - i)
            var word: UInt32 = 0
            for k in 0..<4 {
                let s: UInt32
                if k < n {
                    guard let v = sextet(u[i + k]) else { return nil }
                    s = v
                } else {
                    s = 0
                }
                word = word << 6 | s
            }
            let bytes = n - 1
            // The bits below the last whole byte must be zero.
            if n < 4, word & ((1 << UInt32(24 - 8 * bytes)) - 1) != 0 { return nil }
            for k in 0..<bytes { out.append(UInt8((word >> UInt32(16 - 8 * k)) & 0xFF)) }
            i += 4
        }
        return out
    }
}
