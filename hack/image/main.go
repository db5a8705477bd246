// Command image writes an OCI image tarball of cascade for campaign pods
// (`make image`): the static cascade binary at /cascade and the
// control-plane binaries of one release at /kube, one layer each, built
// with go-containerregistry from the files on disk (no Docker daemon, no
// base image), then read back and validated with the same library.
//
//	go run . -cascade BIN -kube DIR -tag cascade:dev -o FILE
package main

import (
	"archive/tar"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/validate"
)

// kubeBinaries are the control-plane binaries a pod's envtest runs.
var kubeBinaries = []string{"etcd", "kube-apiserver", "kube-controller-manager"}

func main() {
	cascade := flag.String("cascade", "bin/cascade-static", "the static cascade binary")
	kube := flag.String("kube", "", "directory of etcd, kube-apiserver and kube-controller-manager")
	tag := flag.String("tag", "cascade:dev", "the image's reference in the tarball")
	out := flag.String("o", "bin/cascade-image.tar", "the image tarball to write")
	flag.Parse()
	if err := run(*cascade, *kube, *tag, *out); err != nil {
		fmt.Fprintln(os.Stderr, "image:", err)
		os.Exit(1)
	}
}

// layer is a tar layer holding files (path in the image: path on disk),
// each executable, with a fixed time so that the same files make the same
// layer.
func layer(files [][2]string) (v1.Layer, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	// /tmp for envtest's certificates, etcd's data and --out: the image
	// has no base to bring one
	if err := tw.WriteHeader(&tar.Header{Name: "tmp/", Mode: 0o1777, Typeflag: tar.TypeDir, ModTime: time.Unix(0, 0)}); err != nil {
		return nil, err
	}
	for _, f := range files {
		b, err := os.ReadFile(f[1])
		if err != nil {
			return nil, err
		}
		if err := tw.WriteHeader(&tar.Header{Name: f[0], Mode: 0o755, Size: int64(len(b)), Typeflag: tar.TypeReg, ModTime: time.Unix(0, 0)}); err != nil {
			return nil, err
		}
		if _, err := tw.Write(b); err != nil {
			return nil, err
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	data := buf.Bytes()
	return tarball.LayerFromOpener(func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(data)), nil })
}

func run(cascade, kube, tag, out string) error {
	if kube == "" {
		return fmt.Errorf("-kube: the control-plane binaries' directory is required")
	}
	ref, err := name.NewTag(tag)
	if err != nil {
		return err
	}
	kubeFiles := [][2]string{}
	for _, b := range kubeBinaries {
		kubeFiles = append(kubeFiles, [2]string{"kube/" + b, filepath.Join(kube, b)})
	}
	kl, err := layer(kubeFiles)
	if err != nil {
		return err
	}
	cl, err := layer([][2]string{{"cascade", cascade}})
	if err != nil {
		return err
	}
	img, err := mutate.AppendLayers(empty.Image, kl, cl)
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	cf = cf.DeepCopy()
	cf.OS, cf.Architecture = "linux", "amd64"
	cf.Config.Entrypoint = []string{"/cascade"}
	cf.Config.Env = []string{"KUBEBUILDER_ASSETS=/kube", "HOME=/tmp", "TMPDIR=/tmp"}
	cf.Config.WorkingDir = "/tmp"
	cf.Created = v1.Time{Time: time.Unix(0, 0)}
	if img, err = mutate.ConfigFile(img, cf); err != nil {
		return err
	}
	if err := tarball.WriteToFile(out, ref, img); err != nil {
		return err
	}
	// read back and validated from the file, as an importer would
	back, err := tarball.ImageFromPath(out, &ref)
	if err != nil {
		return err
	}
	if err := validate.Image(back); err != nil {
		return fmt.Errorf("%s does not validate: %w", out, err)
	}
	d, _ := back.Digest()
	st, _ := os.Stat(out)
	fmt.Printf("%s: %s %s, %d bytes, validated\n", out, tag, d, st.Size())
	return nil
}
