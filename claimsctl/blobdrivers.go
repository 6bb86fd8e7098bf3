package main

// The cloud blob stores BLOB_URL may name; internal/blobs registers only
// file://, the default.
import (
	_ "gocloud.dev/blob/azureblob" // azblob://
	_ "gocloud.dev/blob/gcsblob"   // gs://
	_ "gocloud.dev/blob/s3blob"    // s3://
)
