#include "scaletrain/core/json.hpp"

#include <cmath>
#include <cstdio>

#include "scaletrain/core/error.hpp"

namespace scaletrain {

Json& Json::push_back(Json v) {
  ST_CHECK(type_ == Type::array, "JSON push_back on a non-array");
  items_.push_back(std::move(v));
  return items_.back();
}

std::size_t Json::size() const { return type_ == Type::array ? items_.size() : members_.size(); }

Json& Json::set(const std::string& key, Json v) {
  Json& slot = (*this)[key];
  slot = std::move(v);
  return slot;
}

Json& Json::operator[](const std::string& key) {
  if (type_ == Type::null) type_ = Type::object;
  ST_CHECK(type_ == Type::object, "JSON key '" << key << "' on a non-object");
  for (auto& m : members_)
    if (m.first == key) return m.second;
  members_.emplace_back(key, Json());
  return members_.back().second;
}

bool Json::contains(const std::string& key) const {
  for (const auto& m : members_)
    if (m.first == key) return true;
  return false;
}

std::string json_quote(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"':
        out += "\\\"";
        break;
      case '\\':
        out += "\\\\";
        break;
      case '\n':
        out += "\\n";
        break;
      case '\t':
        out += "\\t";
        break;
      case '\r':
        out += "\\r";
        break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

std::string Json::dump(int indent) const {
  std::string out;
  write(out, indent, 0);
  return out;
}

void Json::write(std::string& out, int indent, int depth) const {
  auto newline = [&](int d) {
    if (indent < 0) return;
    out += '\n';
    out.append(static_cast<std::size_t>(indent * d), ' ');
  };
  switch (type_) {
    case Type::null:
      out += "null";
      break;
    case Type::boolean:
      out += bool_ ? "true" : "false";
      break;
    case Type::integer:
      out += std::to_string(int_);
      break;
    case Type::number: {
      if (!std::isfinite(num_)) {
        out += "null";  // JSON has no NaN/inf
      } else {
        char buf[32];
        std::snprintf(buf, sizeof buf, "%.15g", num_);  // exact for ms timestamps, short for 0.1
        out += buf;
      }
      break;
    }
    case Type::string:
      out += json_quote(str_);
      break;
    case Type::array: {
      out += '[';
      for (std::size_t i = 0; i < items_.size(); ++i) {
        if (i) out += indent < 0 ? ", " : ",";
        newline(depth + 1);
        items_[i].write(out, indent, depth + 1);
      }
      if (!items_.empty()) newline(depth);
      out += ']';
      break;
    }
    case Type::object: {
      out += '{';
      for (std::size_t i = 0; i < members_.size(); ++i) {
        if (i) out += indent < 0 ? ", " : ",";
        newline(depth + 1);
        out += json_quote(members_[i].first);
        out += ": ";
        members_[i].second.write(out, indent, depth + 1);
      }
      if (!members_.empty()) newline(depth);
      out += '}';
      break;
    }
  }
}

}  // namespace scaletrain
