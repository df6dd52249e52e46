// go_snapshot: stands in for the Go tool's whole full snapshot with --compression-policy gzip and
// a Local store (bench/gzip.sh, bench/README.md): what its snapshotter does, in its order, with
// the same libraries: etcd's Go client (go.etcd.io/etcd/client/v3) opens Maintenance.Snapshot,
// the stream goes through gzip.NewWriter at the default level in a goroutine behind an io.Pipe
// (its compressor.CompressSnapshot), and is copied into the store's file, which is synced and
// closed (its LocalSnapStore.Save). The Go tool itself is not built here: see bench/README.md.
//
//	go_snapshot ENDPOINT OUT_FILE [gzip|none]
package main

import (
	"compress/gzip"
	"context"
	"fmt"
	"io"
	"os"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

func compress(rc io.ReadCloser) io.ReadCloser {
	pr, pw := io.Pipe()
	go func() {
		zw := gzip.NewWriter(pw)
		_, err := io.Copy(zw, rc)
		if err == nil {
			err = zw.Close()
		}
		rc.Close()
		pw.CloseWithError(err)
	}()
	return pr
}

func run(ep, out string, gz bool) error {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{ep}, DialTimeout: 10 * time.Second})
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx := context.Background()
	// the Go tool reads the revision first and names the object with it
	if _, err := cli.Get(ctx, "", clientv3.WithLastRev()...); err != nil {
		return err
	}
	rc, err := cli.Snapshot(ctx)
	if err != nil {
		return err
	}
	if gz {
		rc = compress(rc)
	}
	defer rc.Close()
	f, err := os.Create(out)
	if err != nil {
		return err
	}
	defer f.Close()
	if _, err := io.Copy(f, rc); err != nil {
		return err
	}
	return f.Sync()
}

func main() {
	if len(os.Args) < 3 {
		fmt.Fprintln(os.Stderr, "usage: go_snapshot ENDPOINT OUT_FILE [gzip|none]")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], len(os.Args) < 4 || os.Args[3] != "none"); err != nil {
		fmt.Fprintln(os.Stderr, "go_snapshot:", err)
		os.Exit(1)
	}
}
