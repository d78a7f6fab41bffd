"""The superblock version of an HDF5 file, read from its bytes as scaletrain reads it
(io::hdf5_superblock_version): the byte after HDF5's signature, which lies at byte 0 or, after a
user block, at 512, 1024, 2048, ...  Versions 0 and 1 (h5py's default) have no metadata checksums."""


def superblock(path):
    data = open(path, "rb").read(1 << 16)
    for at in [0] + [512 << i for i in range(7)]:
        if data[at:at + 8] == b"\x89HDF\r\n\x1a\n":
            return data[at + 8]
    raise AssertionError(f"{path}: no HDF5 signature")
