/// The version of the LocalStore package, following [Semantic Versioning](https://semver.org).
///
/// Before 1.0.0 a minor release may change the public API; every change is listed in `CHANGELOG.md`.
/// The on-disk format each backend writes is versioned separately, per backend.
public enum LocalStoreVersion {
    /// The package version, `MAJOR.MINOR.PATCH`.
    public static let string = "0.1.0"
}
