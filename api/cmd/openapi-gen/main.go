// Command openapi-gen writes the API's OpenAPI document, generated from
// the routes the server registers and the Go types of their bodies (see
// api/internal/apidoc). Run it through go generate in api/:
//
//	go generate ./api
//
// api.TestOpenAPIDocumentIsCurrent fails while the committed document
// differs from what this writes.
package main

import (
	"flag"
	"fmt"
	"os"

	"github.com/gafferhq/gaffer/api/internal/apidoc"
)

func main() {
	out := flag.String("o", "", "write the document to this file (default: standard output)")
	flag.Parse()
	if err := run(*out); err != nil {
		fmt.Fprintln(os.Stderr, "openapi-gen:", err)
		os.Exit(1)
	}
}

func run(out string) error {
	doc, err := apidoc.JSON()
	if err != nil {
		return err
	}
	if out == "" {
		_, err = os.Stdout.Write(doc)
		return err
	}
	return os.WriteFile(out, doc, 0o644)
}
