/// The one error type of the device store.
///
/// `isUnavailable` separates "the database cannot be reached or is locked" (callers pause
/// and retry later; no device is failed) from problems with the data itself.
package struct StoreError: Error, CustomStringConvertible, Sendable, Equatable {
    package enum Code: String, Sendable {
        /// Locked past the busy timeout, unreachable, or the connection dropped.
        case unavailable
        /// The caller's input was refused (bad token, unknown app, bad segment...).
        case invalidInput = "invalid_input"
        case notFound = "not_found"
        case conflict
        /// The database answered with an error Pushfan did not expect.
        case database
    }

    package let code: Code
    package let message: String

    package var isUnavailable: Bool { code == .unavailable }
    package var description: String { message }

    package static func unavailable(_ message: String) -> StoreError { StoreError(code: .unavailable, message: "store unavailable: \(message)") }
    package static func invalidInput(_ message: String) -> StoreError { StoreError(code: .invalidInput, message: message) }
    package static func notFound(_ message: String) -> StoreError { StoreError(code: .notFound, message: message) }
    package static func conflict(_ message: String) -> StoreError { StoreError(code: .conflict, message: message) }
    package static func database(_ message: String) -> StoreError { StoreError(code: .database, message: "database error: \(message)") }
}
