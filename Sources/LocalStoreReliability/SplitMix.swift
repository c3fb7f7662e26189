/// SplitMix64: a small, fast, seedable generator, so every random run reproduces from its seed.
public struct SplitMix: RandomNumberGenerator, Sendable {
    public var state: UInt64

    public init(seed: UInt64) { state = seed }

    public mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    /// A uniform integer in `0..<bound` (`bound > 0`).
    public mutating func below(_ bound: Int) -> Int { Int(next() % UInt64(bound)) }

    /// `true` with probability `1 / n`.
    public mutating func oneIn(_ n: Int) -> Bool { below(n) == 0 }

    /// A random element of `choices`.
    public mutating func pick<T>(_ choices: [T]) -> T { choices[below(choices.count)] }

    /// Mixes a value into a fresh seed (for per-item deterministic content).
    public static func hash(_ x: UInt64) -> UInt64 {
        var g = SplitMix(seed: x)
        return g.next()
    }
}
