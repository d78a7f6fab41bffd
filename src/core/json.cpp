#include "scaletrain/core/json.hpp"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstdlib>

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

namespace {
const char* type_name(Json::Type t) {
  switch (t) {
    case Json::Type::null:
      return "null";
    case Json::Type::boolean:
      return "a boolean";
    case Json::Type::number:
    case Json::Type::integer:
      return "a number";
    case Json::Type::string:
      return "a string";
    case Json::Type::array:
      return "an array";
    case Json::Type::object:
      return "an object";
  }
  return "?";
}
}  // namespace

bool Json::as_bool() const {
  ST_CHECK(type_ == Type::boolean, "JSON: expected a boolean, found " << type_name(type_));
  return bool_;
}

int64_t Json::as_int() const {
  ST_CHECK(type_ == Type::integer, "JSON: expected an integer, found " << type_name(type_));
  return int_;
}

double Json::as_double() const {
  if (type_ == Type::integer) return static_cast<double>(int_);
  ST_CHECK(type_ == Type::number, "JSON: expected a number, found " << type_name(type_));
  return num_;
}

const std::string& Json::as_string() const {
  ST_CHECK(type_ == Type::string, "JSON: expected a string, found " << type_name(type_));
  return str_;
}

const Json& Json::at(std::size_t index) const {
  ST_CHECK(type_ == Type::array, "JSON: expected an array, found " << type_name(type_));
  ST_CHECK(index < items_.size(), "JSON: index " << index << " of an array of " << items_.size());
  return items_[index];
}

const Json& Json::at(const std::string& key) const {
  ST_CHECK(type_ == Type::object, "JSON: expected an object with key '" << key << "', found " << type_name(type_));
  for (const auto& m : members_)
    if (m.first == key) return m.second;
  ST_THROW("JSON: no key '" << key << "'");
}

namespace {

// Recursive-descent parser over the whole text; depth-limited so that hostile input cannot
// overflow the stack.
class Parser {
 public:
  explicit Parser(const std::string& text) : s_(text) {}

  Json document() {
    Json v = value(0);
    skip_space();
    if (at_ != s_.size()) fail("unexpected text after the value");
    return v;
  }

 private:
  static constexpr int kMaxDepth = 256;

  [[noreturn]] void fail(const std::string& what) const { ST_THROW("JSON: " << what << " at offset " << at_); }

  void skip_space() {
    while (at_ < s_.size() && (s_[at_] == ' ' || s_[at_] == '\t' || s_[at_] == '\n' || s_[at_] == '\r')) ++at_;
  }

  bool take(char c) {
    skip_space();
    if (at_ < s_.size() && s_[at_] == c) {
      ++at_;
      return true;
    }
    return false;
  }

  void expect(char c) {
    if (!take(c)) fail(std::string("expected '") + c + "'");
  }

  bool take_word(const char* word) {
    const std::size_t n = std::char_traits<char>::length(word);
    if (s_.compare(at_, n, word) != 0) return false;
    at_ += n;
    return true;
  }

  Json value(int depth) {
    if (depth > kMaxDepth) fail("nesting deeper than 256");
    skip_space();
    if (at_ >= s_.size()) fail("unexpected end");
    const char c = s_[at_];
    if (c == '{') return object(depth);
    if (c == '[') return array(depth);
    if (c == '"') return Json(string());
    if (take_word("true")) return Json(true);
    if (take_word("false")) return Json(false);
    if (take_word("null")) return Json();
    return number();
  }

  Json object(int depth) {
    ++at_;
    Json j = Json::object();
    if (take('}')) return j;
    do {
      skip_space();
      if (at_ >= s_.size() || s_[at_] != '"') fail("expected a key");
      std::string key = string();
      expect(':');
      j.set(key, value(depth + 1));
    } while (take(','));
    expect('}');
    return j;
  }

  Json array(int depth) {
    ++at_;
    Json j = Json::array();
    if (take(']')) return j;
    do {
      j.push_back(value(depth + 1));
    } while (take(','));
    expect(']');
    return j;
  }

  unsigned hex4() {
    if (at_ + 4 > s_.size()) fail("short \\u escape");
    unsigned v = 0;
    for (int i = 0; i < 4; ++i) {
      const char h = s_[at_++];
      v <<= 4;
      if (h >= '0' && h <= '9')
        v |= static_cast<unsigned>(h - '0');
      else if (h >= 'a' && h <= 'f')
        v |= static_cast<unsigned>(h - 'a' + 10);
      else if (h >= 'A' && h <= 'F')
        v |= static_cast<unsigned>(h - 'A' + 10);
      else
        fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void append_utf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string string() {
    ++at_;  // the opening quote
    std::string out;
    for (;;) {
      if (at_ >= s_.size()) fail("unterminated string");
      const char c = s_[at_++];
      if (c == '"') return out;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in a string");
      if (c != '\\') {
        out += c;
        continue;
      }
      if (at_ >= s_.size()) fail("unterminated escape");
      const char e = s_[at_++];
      switch (e) {
        case '"':
        case '\\':
        case '/':
          out += e;
          break;
        case 'b':
          out += '\b';
          break;
        case 'f':
          out += '\f';
          break;
        case 'n':
          out += '\n';
          break;
        case 'r':
          out += '\r';
          break;
        case 't':
          out += '\t';
          break;
        case 'u': {
          unsigned cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // a surrogate pair
            if (!take_word("\\u")) fail("lone high surrogate");
            const unsigned low = hex4();
            if (low < 0xDC00 || low >= 0xE000) fail("bad low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
          }
          append_utf8(out, cp);
          break;
        }
        default:
          fail(std::string("bad escape \\") + e);
      }
    }
  }

  Json number() {
    const std::size_t start = at_;
    if (at_ < s_.size() && s_[at_] == '-') ++at_;
    bool integral = true, digits = false;
    while (at_ < s_.size()) {
      const char c = s_[at_];
      if (c >= '0' && c <= '9') {
        digits = true;
      } else if (c == '.' || c == 'e' || c == 'E' || c == '+' || (c == '-' && at_ > start)) {
        integral = false;
      } else {
        break;
      }
      ++at_;
    }
    if (!digits) {
      at_ = start;
      fail("unexpected character");
    }
    const std::string text = s_.substr(start, at_ - start);
    char* end = nullptr;
    errno = 0;
    if (integral) {
      const long long v = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && *end == '\0') return Json(static_cast<int64_t>(v));
      errno = 0;  // too large for int64: read it as a double
    }
    const double d = std::strtod(text.c_str(), &end);
    if (*end != '\0') {
      at_ = start;
      fail("bad number '" + text + "'");
    }
    return Json(d);
  }

  const std::string& s_;
  std::size_t at_ = 0;
};

}  // namespace

Json Json::parse(const std::string& text) { return Parser(text).document(); }

}  // namespace scaletrain
