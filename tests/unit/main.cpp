// Serial unit tests: one Boost.Test module; each test_<suite>.cpp adds a suite.
#define BOOST_TEST_MODULE scaletrain_unit_tests
#include <boost/test/unit_test.hpp>
