// Serial unit tests: one Boost.Test module; each test_<suite>.cpp adds a suite. HDF5's own error
// printing is silenced once, as in the binaries: expected failures are checked through our errors.
#define BOOST_TEST_MODULE scaletrain_unit_tests
#include <boost/test/unit_test.hpp>

#include "scaletrain/io/hdf5.hpp"

struct SilenceHdf5 {
  SilenceHdf5() { scaletrain::io::h5_silence_errors(); }
};
BOOST_TEST_GLOBAL_FIXTURE(SilenceHdf5);
