import Testing

@testable import PushfanMessages
@testable import PushfanSupport

@Suite("JSONShapeCheck")
struct JSONShapeCheckTests {
    private func problem(_ text: String) -> JSONShapeCheck.Problem? { JSONShapeCheck.problem(in: Array(text.utf8)) }

    @Test("a key given twice is named with the path of its object")
    func duplicates() {
        #expect(problem(#"{"a":1,"a":2}"#) == .duplicateKey(path: "", key: "a"))
        #expect(problem(#"{"x":{"y":[{"k":1},{"k":1,"k":2}]}}"#) == .duplicateKey(path: "x.y[1]", key: "k"))
        #expect(problem(#"{"x":{"y":[{"k":1},{"k":1,"k":2}]}}"#)?.field == "x.y[1].k")
        #expect(problem(#"{"odd key":1,"odd key":2}"#)?.field == #"["odd key"]"#)
        // Escapes are resolved before comparing: these are the same key to every reader.
        #expect(problem(#"{"id":1,"\u0069\u0064":2}"#) == .duplicateKey(path: "", key: "id"))
        #expect(problem(#"{"é":1,"\u00e9":2}"#) == .duplicateKey(path: "", key: "é"))
        #expect(problem(#"{"😀":1,"\ud83d\ude00":2}"#) == .duplicateKey(path: "", key: "😀"))
    }

    @Test("equal keys in different objects, and key-like text inside strings, are fine")
    func notDuplicates() {
        #expect(problem(#"{"a":{"a":1},"b":{"a":1}}"#) == nil)
        #expect(problem(#"[{"a":1},{"a":1}]"#) == nil)
        #expect(problem(#"{"a":"{\"a\":1,\"a\":2}","b":["a","a"]}"#) == nil)
        #expect(problem(#"{"a\"":1,"a":2,"a\\":3}"#) == nil)
    }

    @Test("nesting up to the limit passes; one level more names the value that went too deep")
    func depth() {
        let limit = JSONValue.maxDecodingDepth
        #expect(problem(String(repeating: "[", count: limit) + String(repeating: "]", count: limit)) == nil)
        #expect(problem(String(repeating: "[", count: limit + 1) + String(repeating: "]", count: limit + 1))
            == .tooDeep(path: String(repeating: "[0]", count: limit)))
        let objects = String(repeating: #"{"a":"#, count: limit + 1) + "1" + String(repeating: "}", count: limit + 1)
        #expect(problem(objects) == .tooDeep(path: Array(repeating: "a", count: limit).joined(separator: ".")))
        #expect(problem(#"{"a":[1,2,"#  + String(repeating: "[", count: limit) )?.field == "a[2]" + String(repeating: "[0]", count: limit - 2))
    }

    @Test("text that is not JSON is left to the decoder to describe")
    func notJSON() {
        for text in ["", "}", "]]", #"{"a"#, #"{"a\q":1,"a\q":1}"#, #"{"\ud800":1,"\ud800":2}"#, ",", "hello"] {
            #expect(problem(text) == nil, "\(text)")
        }
    }
}
