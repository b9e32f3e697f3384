// Command shadowtune is the single binary of the shadowtune project: the
// what-if simulator and model tools, the node agent and the operator. Run
// `shadowtune --help`. The commands are in package app (cmd/shadowtune/app),
// which only this package imports.
package main

import (
	"os"

	"github.com/shadowtune/shadowtune/cmd/shadowtune/app"
)

func main() {
	os.Exit(app.Main(os.Args[1:], os.Stdout, os.Stderr))
}
