// go_gunzip: reads a gzip file the way the Go tool does (compress/gzip's Reader, multistream as
// by default) and prints "<plain bytes> <sha256 hex of the plain bytes>". Standard library only,
// so it builds offline. Exit 1 with the reader's error on stderr for anything it refuses.
//
//	go_gunzip FILE   (or stdin without FILE)
package main

import (
	"compress/gzip"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
)

func main() {
	in := io.Reader(os.Stdin)
	if len(os.Args) > 1 {
		f, err := os.Open(os.Args[1])
		if err != nil {
			fmt.Fprintln(os.Stderr, "go_gunzip:", err)
			os.Exit(1)
		}
		defer f.Close()
		in = f
	}
	zr, err := gzip.NewReader(in)
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_gunzip:", err)
		os.Exit(1)
	}
	h := sha256.New()
	n, err := io.Copy(h, zr)
	if err == nil {
		err = zr.Close()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "go_gunzip:", err)
		os.Exit(1)
	}
	fmt.Printf("%d %x\n", n, h.Sum(nil))
}
