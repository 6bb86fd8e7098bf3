package main

// The blob store drivers the soak opens, as the worker registers them:
// file:// for the kill soaks, s3:// (versitygw) for the fault soak.
import (
	_ "gocloud.dev/blob/fileblob" // file://
	_ "gocloud.dev/blob/s3blob"   // s3://
)
