import Foundation

/// Which files the admin API may name as an app's APNs credentials (`key_file`, `cert`,
/// `cert_key`). The API loads what they name to check it, so without a bound an admin key
/// could make the process open any file its user can, and learn from the answer whether a
/// path exists. With `pushfan api --credentials-dir DIR` only regular files inside DIR
/// count, after every symlink and `..` is resolved; a relative name is taken inside DIR.
/// Anything else is refused with one answer, whether it exists or not.
package struct CredentialFiles: Sendable {
    /// The directory, resolved; nil: any path (development, and the default).
    let directory: String?

    /// `directory` resolved now: nil when it is not an existing directory.
    package init?(directory: String) {
        guard let resolved = Self.resolve(directory), (try? FileManager.default.attributesOfItem(atPath: resolved)[.type] as? FileAttributeType) == .typeDirectory
        else { return nil }
        self.directory = resolved
    }

    /// No bound: the path is used as given.
    package static let anywhere = CredentialFiles()

    private init() { directory = nil }

    /// The path to store and load for `given`, or the refusal naming `field`.
    func path(_ given: String, field: String) throws(APIError) -> String {
        guard let directory else { return given }
        let inside = directory.hasSuffix("/") ? directory : directory + "/"
        guard let resolved = Self.resolve(given.hasPrefix("/") ? given : inside + given), resolved.hasPrefix(inside),
              (try? FileManager.default.attributesOfItem(atPath: resolved)[.type] as? FileAttributeType) == .typeRegular
        else {
            throw APIError(422, "invalid_credentials", "\(field): not a file in the API's credentials directory (pushfan api --credentials-dir)", field: field)
        }
        return resolved
    }

    /// The canonical absolute path (`realpath`), nil when it does not exist.
    private static func resolve(_ path: String) -> String? {
        guard let pointer = realpath(path, nil) else { return nil }
        defer { free(pointer) }
        return String(cString: pointer)
    }
}
