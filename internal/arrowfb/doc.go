// Package arrowfb reads and verifies the flatbuffer metadata of Arrow IPC
// messages and files before arrow-go does: arrow-go trusts it (vector
// lengths size its allocations, child offsets drive its recursion), so a
// peer or a file that lies about it could end the process. dlarrow's
// file reader and dlflight's stream reader run every message through
// Verify and Check first.
package arrowfb
