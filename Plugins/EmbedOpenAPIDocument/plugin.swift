import Foundation
import PackagePlugin

/// Puts docs/openapi.json into the API module as `OpenAPIDocument.json` at build time, so the
/// document is kept as the JSON file it is and the binary still carries it whole.
@main
struct EmbedOpenAPIDocument: BuildToolPlugin {
    func createBuildCommands(context: PluginContext, target: Target) throws -> [Command] {
        let input = context.package.directoryURL.appending(path: "docs/openapi.json")
        let output = context.pluginWorkDirectoryURL.appending(path: "OpenAPIDocument.swift")
        return [
            .buildCommand(
                displayName: "Embedding docs/openapi.json", executable: try context.tool(named: "EmbedText").url,
                arguments: [input.path(), output.path(), "OpenAPIDocument", "json"], inputFiles: [input], outputFiles: [output]),
        ]
    }
}
