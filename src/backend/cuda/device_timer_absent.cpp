// Stand-in for the device event timer (device_timer.hpp) in a build without the CUDA backend:
// no context is on a GPU, so there is nothing to measure.
#include "scaletrain/backend/device_timer.hpp"

namespace scaletrain {

struct DeviceEventTimer::Impl {};

DeviceEventTimer::DeviceEventTimer(Context&, int slots) : slots_(slots) {}
DeviceEventTimer::~DeviceEventTimer() = default;
bool DeviceEventTimer::enabled() const { return false; }
void DeviceEventTimer::begin(int) noexcept {}
void DeviceEventTimer::end(int) noexcept {}
std::vector<double> DeviceEventTimer::collect() { return std::vector<double>(static_cast<std::size_t>(slots_), 0.0); }

}  // namespace scaletrain
