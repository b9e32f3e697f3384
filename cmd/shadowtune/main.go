// Command shadowtune is the single binary of the shadowtune project: the
// what-if simulator and model tools, and (in later releases) the node agent
// and the operator. Run `shadowtune --help`.
package main

import (
	"os"

	"github.com/shadowtune/shadowtune/internal/cli"
)

func main() {
	os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr))
}
