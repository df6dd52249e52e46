// go_gzip: compresses stdin to stdout exactly as the Go tool compresses a snapshot with
// --compression-policy gzip (its compressor: gzip.NewWriter at the default level, io.Copy from
// the snapshot stream, Close). Standard library only. For bench/gzip.sh.
package main

import (
	"compress/gzip"
	"fmt"
	"io"
	"os"
)

func main() {
	zw := gzip.NewWriter(os.Stdout)
	_, err := io.Copy(zw, os.Stdin)
	if err == nil {
		err = zw.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_gzip:", err)
		os.Exit(1)
	}
}
