// Whole-file checksums, computed on the file's bytes without any library that parses them: a
// damaged file must be recognised before HDF5 decodes it (libhdf5 can crash or loop on damaged
// metadata). The hash is XXH3-64 (xxHash), about 10 GB/s on one core, well above what a node
// reads from a parallel file system; `xxhsum -H3 FILE` prints the same value.
//
// Sealed files: a checkpoint keeps its own checksum in its first kSealBytes, an HDF5 user block
// (which the library and h5py skip): "scaletrain-seal 1", the file's size in bytes and the
// XXH3-64 of everything after the seal. The seal is written after the file is closed, before it
// is published by rename, and checked before the file is opened with HDF5.
#pragma once

#include <cstdint>
#include <string>

namespace scaletrain::io {

struct FileDigest {
  int64_t bytes = 0;  // bytes hashed
  uint64_t xxh3 = 0;  // XXH3-64, seed 0
};

// XXH3-64 of the bytes of `path` from `offset` to its end, read sequentially in 8 MiB pieces.
// Throws scaletrain::Error naming the file when it cannot be opened or read.
FileDigest digest_file(const std::string& path, int64_t offset = 0);

// 16 lowercase hex digits, as `xxhsum -H3` prints them.
std::string xxh3_hex(uint64_t hash);
// Parses xxh3_hex's output; false when `text` is not 16 hex digits.
bool parse_xxh3_hex(const std::string& text, uint64_t* hash);

// The user block that holds the seal: HDF5 wants a power of two >= 512.
constexpr int64_t kSealBytes = 512;

// Writes the seal into the first kSealBytes of `path`, a closed HDF5 file created with a user
// block of kSealBytes (H5File's create mode with userblock_bytes = kSealBytes), and syncs it.
void seal_file(const std::string& path);

enum class Seal { absent, intact };
// Checks the seal of `path` against its bytes. Returns absent when the file carries no seal
// (written by another tool or an older version); throws a scaletrain::Error that starts with
// "<what> <path> is damaged:" when the size or the hash differs (cut short, overwritten).
Seal check_seal(const std::string& path, const std::string& what);

// The version of an HDF5 file's superblock, read from its bytes (no HDF5 call, so safe on a
// damaged file): the byte after HDF5's signature, which lies at byte 0 or, after a user block, at
// 512, 1024, 2048, ... below the file's size. -1 when the file has no signature there (not HDF5,
// empty). Throws naming the file when it cannot be opened or read.
int hdf5_superblock_version(const std::string& path);

// Superblock versions 2 and later (HDF5 1.8's format and newer: what scaletrain writes, and h5py
// with libver='latest' or ('v110', 'latest')) checksum every piece of file metadata, so libhdf5
// refuses a damaged one; versions 0 and 1 (HDF5's default, oldest format: h5py's default) have
// none, and a damaged file reaches libhdf5's parser unchecked.
constexpr int kFirstChecksummedSuperblock = 2;
inline bool hdf5_metadata_checksummed(int superblock_version) {
  return superblock_version >= kFirstChecksummedSuperblock;
}

}  // namespace scaletrain::io
