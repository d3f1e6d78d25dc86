// The statistics of one key (report.cpp), for decide.cpp's keys_json.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "decide.hpp"

namespace tnbc::shim::replay::adapt {

/// One entry of the statistics' "keys" array (docs/config.md): `k`, whose path the statistics
/// name `path`; `site_name` names a call site by its index.
std::string key_json(const Key& k, const char* path, const std::function<SiteName(std::int64_t)>& site_name);

}  // namespace tnbc::shim::replay::adapt
