import LocalStore
import LocalStoreKV

extension KeyCodec {
    /// The primary key an entry of `index` names: its value, or — for a bare entry (an empty value,
    /// written by stores of format 4 for a whole key) — the bytes after the index's components, which
    /// are the id's key (``appendId(_:into:)``) and so exactly the row's untruncated primary key.
    /// - Throws: `corrupt` when a bare entry's key does not parse as the index's components and an id.
    static func primaryKey(
        ofIndexEntry key: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, _ index: IndexDefinition
    ) throws -> UnsafeRawBufferPointer {
        if !value.isEmpty { return value }
        var offset = 0
        if key.count <= prefixLimit {
            for c in index.components {
                guard let n = componentLength(key, at: offset, descending: c.descending && !c.noCase) else {
                    offset = key.count
                    break
                }
                offset += n
            }
        } else {
            offset = key.count
        }
        guard offset < key.count else {
            throw LMDBErrors.corrupt("an entry of index '\(index.database)' names no row")
        }
        return UnsafeRawBufferPointer(rebasing: key[offset...])
    }
}
