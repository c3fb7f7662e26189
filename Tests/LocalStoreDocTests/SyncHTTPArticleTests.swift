import Foundation
import LocalStore
import LocalStoreSync
import LocalStoreSyncHTTP
import Testing

// The snippet of the LocalStoreSyncHTTP landing page (Sources/LocalStoreSyncHTTP/LocalStoreSyncHTTP.docc),
// verbatim (ArticleSnippetTests checks that): it builds a transport and a sync context; the transport's
// requests are tested against a loopback service in Tests/LocalStoreSyncTests/HTTPTests.swift.

/// A stand-in for the application's token source.
private struct Tokens: Sendable {
    func current() async throws -> String { "t0ken" }
}

@Suite("Article: LocalStoreSyncHTTP")
struct SyncHTTPArticleTests {
    @Test("the landing page's snippet builds a transport with the configured protocol, URL and authentication")
    func landingPage() async throws {
        let store = try InMemoryStore()
        let tokens = Tokens()

        let transport = HTTPSyncTransport(
            .init(baseURL: "https://todo.example.com", protocol: .datasync,
                  authentication: { [.init("Authorization", "Bearer \(try await tokens.current())")] }),
            schemas: store)
        let sync = SyncContext(store: store, transport: transport)

        _ = sync
        #expect(transport.configuration.serviceProtocol == .datasync)
        #expect(transport.configuration.baseURL == "https://todo.example.com")
        let headers = try await transport.configuration.authentication?() ?? []
        #expect(headers == [.init("Authorization", "Bearer t0ken")])
    }
}
