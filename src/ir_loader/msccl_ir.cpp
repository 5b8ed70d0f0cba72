// Parsing half of the MSCCL-IR loader: XML -> Program with strict, context-free attribute checks.
// Checks that need the whole program (peers vs ngpus, offsets vs chunk counts, matching, cycles)
// are validateProgram()'s, so generated programs get them too.
#include "ir_loader/msccl_ir.hpp"

#include <algorithm>
#include <array>
#include <charconv>
#include <fstream>
#include <iterator>
#include <map>
#include <limits>
#include <utility>

#include <pugixml.hpp>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace occl::ir {
namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr size_t kMaxAttributes = 32;

template <typename T>
struct NamedValue {
  std::string_view name;
  T value;
};

// A row of device/'s tables as the value MSCCL-IR's name stands for.
constexpr OpType irValue(const StepOpInfo& o) { return o.op; }
constexpr CollKind irValue(const CollTypeInfo& c) { return static_cast<CollKind>(c.type); }

// The rows of `kTable` that MSCCL-IR has a name for, as (name, value) pairs.
template <const auto& kTable>
constexpr auto irNamed() {
  constexpr size_t kCount = [] {
    size_t n = 0;
    for (const auto& row : kTable) n += row.irName != nullptr ? 1 : 0;
    return n;
  }();
  std::array<NamedValue<decltype(irValue(kTable[0]))>, kCount> out{};
  size_t n = 0;
  for (const auto& row : kTable)
    if (row.irName != nullptr) out[n++] = {row.irName, irValue(row)};
  return out;
}

constexpr auto kOps = irNamed<kStepOps>();     // step types
constexpr auto kColls = irNamed<kCollTypes>();  // coll names
constexpr NamedValue<BufferKind> kBuffers[] = {{"i", BufferKind::Input}, {"o", BufferKind::Output}, {"s", BufferKind::Scratch}};
constexpr NamedValue<int> kProtocols[] = {{"Simple", 0}, {"LL", 1}, {"LL128", 2}};

// Attribute text quoted in a message: bounded and printable, since it may be arbitrary bytes.
std::string quoted(std::string_view raw) {
  std::string out = "'";
  for (size_t i = 0; i < raw.size() && i < 40; ++i) out += absl::ascii_isprint(raw[i]) ? raw[i] : '?';
  if (raw.size() > 40) out += "...";
  return out + "'";
}

class LineIndex {
 public:
  explicit LineIndex(std::string_view text) {
    for (size_t i = 0; i < text.size(); ++i)
      if (text[i] == '\n') newlines_.push_back(static_cast<ptrdiff_t>(i));
  }
  int lineOf(ptrdiff_t offset) const {
    if (offset < 0) return 0;
    return static_cast<int>(std::lower_bound(newlines_.begin(), newlines_.end(), offset) - newlines_.begin()) + 1;
  }

 private:
  std::vector<ptrdiff_t> newlines_;
};

// Reads one element's attributes strictly: required ones must be present exactly once, integers
// must be plain decimals that fit, names must come from a fixed set. Each problem is reported
// against the element; the caller checks failed() before trusting the values.
class AttrReader {
 public:
  AttrReader(pugi::xml_node node, int line, std::string element, ErrorList& errors)
      : node_(node), line_(line), element_(std::move(element)), errors_(errors) {
    checkDuplicates();
  }

  void error(std::string msg) {
    failed_ = true;
    errors_.add(line_, element_, std::move(msg));
  }
  bool failed() const { return failed_; }
  bool has(const char* name) {
    consult(name);
    return static_cast<bool>(node_.attribute(name));
  }

  std::optional<std::string_view> text(const char* name) {
    consult(name);
    pugi::xml_attribute a = node_.attribute(name);
    if (!a) {
      error(absl::StrCat("missing required attribute '", name, "'"));
      return std::nullopt;
    }
    return std::string_view(a.value());
  }

  std::optional<int64_t> integer(const char* name, int64_t lo, int64_t hi) {
    std::optional<std::string_view> raw = text(name);
    if (!raw) return std::nullopt;
    int64_t v = 0;
    auto [end, ec] = std::from_chars(raw->data(), raw->data() + raw->size(), v);
    if (ec == std::errc::result_out_of_range) return fail(absl::StrCat("attribute '", name, "' is out of range: ", quoted(*raw)));
    if (ec != std::errc() || end != raw->data() + raw->size())
      return fail(absl::StrCat("attribute '", name, "' must be an integer, got ", quoted(*raw)));
    if (v < lo || v > hi) {
      return fail(hi == kInt32Max ? absl::StrCat("attribute '", name, "' must be >= ", lo, ", got ", v)
                                  : absl::StrCat("attribute '", name, "' must be in ", lo, "..", hi, ", got ", v));
    }
    return v;
  }

  // Absent -> fallback; present -> a plain unsigned decimal.
  std::optional<uint64_t> bytes(const char* name, uint64_t fallback) {
    if (!has(name)) return fallback;  // has() consults it
    std::string_view raw = node_.attribute(name).value();
    uint64_t v = 0;
    auto [end, ec] = std::from_chars(raw.data(), raw.data() + raw.size(), v);
    if (ec != std::errc() || end != raw.data() + raw.size())
      return fail(absl::StrCat("attribute '", name, "' must be a non-negative integer, got ", quoted(raw)));
    return v;
  }

  // `table`: NamedValues (an array or std::array).
  template <typename Table, typename T = decltype(std::begin(std::declval<const Table&>())->value)>
  std::optional<T> choice(const char* name, const Table& table) {
    std::optional<std::string_view> raw = text(name);
    if (!raw) return std::nullopt;
    std::string allowed;
    for (const NamedValue<T>& e : table) {
      if (e.name == *raw) return e.value;
      absl::StrAppend(&allowed, allowed.empty() ? "" : ", ", std::string(e.name));
    }
    return fail(absl::StrCat("attribute '", name, "' must be one of ", allowed, "; got ", quoted(*raw)));
  }

  // Calls visit(name) for each attribute of the element that no read asked about, once all reads
  // are done: MSCCL ignores attributes it does not know, occl too, but says so.
  template <typename Visit>
  void forUnread(Visit&& visit) const {
    for (pugi::xml_attribute a = node_.first_attribute(); a; a = a.next_attribute()) {
      const std::string_view name = a.name();
      if (std::find(consulted_.begin(), consulted_.begin() + nConsulted_, name) == consulted_.begin() + nConsulted_)
        visit(name);
    }
  }

 private:
  std::nullopt_t fail(std::string msg) {
    error(std::move(msg));
    return std::nullopt;
  }

  void consult(const char* name) {
    if (nConsulted_ < consulted_.size()) consulted_[nConsulted_++] = name;
  }

  // XML forbids repeated attributes but pugixml keeps them; which one counts would be a guess.
  // The pairwise scan is bounded by refusing elements with more attributes than any real one.
  void checkDuplicates() {
    size_t n = 0;
    for (pugi::xml_attribute a = node_.first_attribute(); a; a = a.next_attribute()) ++n;
    if (n > kMaxAttributes) {
      error(absl::StrCat("has ", n, " attributes, at most ", kMaxAttributes, " are accepted"));
      return;
    }
    for (pugi::xml_attribute a = node_.first_attribute(); a; a = a.next_attribute())
      for (pugi::xml_attribute b = a.next_attribute(); b; b = b.next_attribute())
        if (std::string_view(a.name()) == b.name()) error(absl::StrCat("attribute '", a.name(), "' appears more than once"));
  }

  pugi::xml_node node_;
  int line_;
  std::string element_;
  ErrorList& errors_;
  bool failed_ = false;
  // What the element's reads asked for: an element kind reads at most 16 names.
  std::array<std::string_view, 16> consulted_{};
  size_t nConsulted_ = 0;
};

class Parser {
 public:
  Parser(std::string_view xml, ErrorList& errors) : xml_(xml), lines_(xml), errors_(errors) {}

  std::optional<Program> run() {
    // encoding_utf8: no transcoding, so node offsets stay offsets into xml_ (line numbers).
    pugi::xml_parse_result res = doc_.load_buffer(xml_.data(), xml_.size(), pugi::parse_default, pugi::encoding_utf8);
    if (!res) {
      errors_.add(lines_.lineOf(res.offset), "<document>", absl::StrCat("XML parse error: ", res.description()));
      return std::nullopt;
    }
    pugi::xml_node root = findRoot();
    if (!root) return std::nullopt;
    Program p;
    parseAlgo(root, p);
    if (!errors_.empty()) return std::nullopt;
    return p;
  }

  // One warning per element kind and unknown attribute name, at its first line, with how many
  // elements carry it; at most kMaxErrors of them.
  std::vector<LoadError> warnings() const {
    std::vector<LoadError> out;
    for (const auto& [key, u] : unread_) {
      const auto& [kind, name] = key;
      std::string msg = absl::StrCat("unknown attribute '", name, "' ignored, as MSCCL ignores it");
      if (u.count > 1) absl::StrAppend(&msg, " (on ", u.count, " ", kind, " elements)");
      out.push_back({u.firstLine, kind, std::move(msg)});
    }
    if (unreadDropped_ > 0)
      out.push_back({0, "<document>", absl::StrCat(unreadDropped_, " more unknown attributes ignored")});
    return out;
  }

 private:
  int lineOf(pugi::xml_node n) const { return lines_.lineOf(n.offset_debug()); }

  // Element name in messages, with its id as written (it may be what is wrong).
  static std::string label(pugi::xml_node n, const char* idAttr) {
    pugi::xml_attribute id = n.attribute(idAttr);
    if (!id) return absl::StrCat("<", n.name(), ">");
    std::string v = quoted(id.value());
    return absl::StrCat("<", n.name(), " ", idAttr, "=", v.substr(1, v.size() - 2), ">");
  }

  // Visits the element children named `want`; anything else but whitespace is an error.
  template <typename Visit>
  void forChildren(pugi::xml_node parent, const std::string& where, const char* want, Visit&& visit) {
    for (pugi::xml_node c = parent.first_child(); c && !errors_.full(); c = c.next_sibling()) {
      if (c.type() == pugi::node_element && std::string_view(c.name()) == want) {
        if (!visit(c)) return;
      } else if (c.type() == pugi::node_element) {
        errors_.add(lineOf(c), where, absl::StrCat("unexpected element <", c.name(), ">, expected <", want, ">"));
      } else if (c.type() == pugi::node_pcdata || c.type() == pugi::node_cdata) {
        errors_.add(lineOf(c), where, absl::StrCat("unexpected text ", quoted(c.value())));
      }
    }
  }

  pugi::xml_node findRoot() {
    pugi::xml_node root;
    forChildren(doc_, "<document>", "algo", [&](pugi::xml_node n) {
      if (root) errors_.add(lineOf(n), "<document>", "more than one <algo> element");
      root = n;
      return true;
    });
    if (!root && errors_.empty()) errors_.add(1, "<document>", "no <algo> element");
    return errors_.empty() ? root : pugi::xml_node();
  }

  void parseAlgo(pugi::xml_node node, Program& p) {
    AttrReader a(node, lineOf(node), "<algo>", errors_);
    if (auto v = a.text("name")) p.name = std::string(*v);
    if (auto v = a.choice("proto", kProtocols)) p.protocol = std::string(kProtocols[*v].name);
    if (auto v = a.integer("nchannels", 1, kMaxChannels)) p.nChannels = static_cast<int32_t>(*v);
    if (auto v = a.integer("nchunksperloop", 1, kMaxChunksPerLoop)) p.nChunksPerLoop = static_cast<int32_t>(*v);
    std::optional<int64_t> ngpus = a.integer("ngpus", 1, kMaxRanks);
    if (auto v = a.choice("coll", kColls)) p.coll = *v;
    if (auto v = a.integer("inplace", 0, 1)) p.inPlace = *v == 1;
    p.outOfPlace = !p.inPlace;  // what MSCCLang files without outofplace mean
    if (a.has("outofplace")) {
      if (auto v = a.integer("outofplace", 0, 1)) p.outOfPlace = *v == 1;
    }
    if (!a.failed() && !p.inPlace && !p.outOfPlace) a.error("inplace and outofplace are both 0: no call could run it");
    if (auto v = a.bytes("minBytes", 0)) p.minBytes = *v;
    // MSCCL reads maxBytes="0" as "no upper bound".
    if (auto v = a.bytes("maxBytes", 0)) p.maxBytes = *v == 0 ? std::numeric_limits<uint64_t>::max() : *v;
    if (!a.failed() && p.minBytes > p.maxBytes)
      a.error(absl::StrCat("minBytes (", p.minBytes, ") must not exceed maxBytes (", p.maxBytes, ")"));
    noteUnread(a, "<algo>", lineOf(node));
    // Without a valid ngpus the gpus are still parsed, to report their own errors.
    p.nRanks = static_cast<int32_t>(ngpus.value_or(kMaxRanks));
    p.ranks.resize(static_cast<size_t>(p.nRanks));
    std::vector<int> firstLine(p.ranks.size(), 0);
    forChildren(node, "<algo>", "gpu", [&](pugi::xml_node g) {
      parseGpu(g, p, firstLine);
      return true;
    });
    if (!ngpus) return;
    for (size_t r = 0; r < firstLine.size() && !errors_.full(); ++r)
      if (firstLine[r] == 0) a.error(absl::StrCat("no <gpu id=", r, "> (ngpus=", p.nRanks, " needs ids 0..", p.nRanks - 1, ")"));
  }

  void parseGpu(pugi::xml_node node, Program& p, std::vector<int>& firstLine) {
    const std::string where = label(node, "id");
    const int line = lineOf(node);
    AttrReader a(node, line, where, errors_);
    std::optional<int64_t> id = a.integer("id", 0, p.nRanks - 1);
    RankProgram rank;
    rank.sourceLine = line;
    if (auto v = a.integer("i_chunks", 0, kMaxChunksPerLoop)) rank.inputChunks = static_cast<int32_t>(*v);
    if (auto v = a.integer("o_chunks", 0, kMaxChunksPerLoop)) rank.outputChunks = static_cast<int32_t>(*v);
    if (auto v = a.integer("s_chunks", 0, kMaxScratchChunks)) rank.scratchChunks = static_cast<int32_t>(*v);
    noteUnread(a, "<gpu>", line);
    if (id && firstLine[*id] != 0) a.error(absl::StrCat("duplicate gpu id ", *id, " (first at line ", firstLine[*id], ")"));
    forChildren(node, where, "tb", [&](pugi::xml_node t) {
      if (rank.blocks.size() == static_cast<size_t>(kMaxBlocksPerRank)) {
        errors_.add(lineOf(t), where, absl::StrCat("more than ", kMaxBlocksPerRank, " threadblocks"));
        return false;
      }
      rank.blocks.push_back(parseTb(t, where, static_cast<int32_t>(rank.blocks.size())));
      return true;
    });
    if (id && firstLine[*id] == 0) {
      firstLine[*id] = line;
      p.ranks[*id] = std::move(rank);
    }
  }

  BlockProgram parseTb(pugi::xml_node node, const std::string& gpuWhere, int32_t index) {
    const std::string where = absl::StrCat(gpuWhere, "/", label(node, "id"));
    BlockProgram block;
    block.sourceLine = lineOf(node);
    AttrReader a(node, block.sourceLine, where, errors_);
    if (auto v = a.integer("id", 0, kInt32Max); v && *v != index)
      a.error(absl::StrCat("tb id must be ", index, " (ids are 0..n-1 in document order), got ", *v));
    if (auto v = a.integer("send", -1, kInt32Max)) block.sendPeer = static_cast<int32_t>(*v);
    if (auto v = a.integer("recv", -1, kInt32Max)) block.recvPeer = static_cast<int32_t>(*v);
    if (auto v = a.integer("chan", 0, kInt32Max)) block.channel = static_cast<int32_t>(*v);
    noteUnread(a, "<tb>", block.sourceLine);
    forChildren(node, where, "step", [&](pugi::xml_node s) {
      if (block.steps.size() == static_cast<size_t>(kMaxStepsPerBlock)) {
        errors_.add(lineOf(s), where, absl::StrCat("more than ", kMaxStepsPerBlock, " steps"));
        return false;
      }
      block.steps.push_back(parseStep(s, where, static_cast<int32_t>(block.steps.size())));
      return true;
    });
    return block;
  }

  Step parseStep(pugi::xml_node node, const std::string& tbWhere, int32_t index) {
    Step st;
    st.sourceLine = lineOf(node);
    AttrReader a(node, st.sourceLine, absl::StrCat(tbWhere, "/", label(node, "s")), errors_);
    if (auto v = a.integer("s", 0, kInt32Max); v && *v != index)
      a.error(absl::StrCat("step s must be ", index, " (steps are 0..n-1 in document order), got ", *v));
    if (auto v = a.choice("type", kOps)) st.op = *v;
    if (auto v = a.choice("srcbuf", kBuffers)) st.srcBuf = *v;
    if (auto v = a.integer("srcoff", -1, kInt32Max)) st.srcOff = static_cast<int32_t>(*v);
    if (auto v = a.choice("dstbuf", kBuffers)) st.dstBuf = *v;
    if (auto v = a.integer("dstoff", -1, kInt32Max)) st.dstOff = static_cast<int32_t>(*v);
    if (auto v = a.integer("cnt", 0, kInt32Max)) st.count = static_cast<int32_t>(*v);
    if (auto v = a.integer("depid", -1, kInt32Max)) st.depBlock = static_cast<int32_t>(*v);
    if (auto v = a.integer("deps", -1, kInt32Max)) st.depStep = static_cast<int32_t>(*v);
    if (auto v = a.integer("hasdep", 0, 1)) st.hasDep = *v == 1;
    noteUnread(a, "<step>", st.sourceLine);
    return st;
  }

  void noteUnread(const AttrReader& a, const char* kind, int line) {
    a.forUnread([&](std::string_view name) {
      std::string shown = quoted(name);  // arbitrary bytes: printable and bounded, without the quotes
      std::pair<std::string, std::string> key{kind, shown.substr(1, shown.size() - 2)};
      auto it = unread_.find(key);
      if (it == unread_.end()) {
        if (unread_.size() == kMaxErrors) {
          ++unreadDropped_;
          return;
        }
        it = unread_.emplace(std::move(key), Unread{line, 0}).first;
      }
      ++it->second.count;
    });
  }

  std::string_view xml_;
  LineIndex lines_;
  ErrorList& errors_;
  pugi::xml_document doc_;
  struct Unread {
    int firstLine;
    size_t count;
  };
  std::map<std::pair<std::string, std::string>, Unread> unread_;  // (<kind>, name)
  size_t unreadDropped_ = 0;
};

LoadResult failure(std::vector<LoadError> errors) { return {std::nullopt, std::move(errors), {}}; }

}  // namespace

LoadResult loadMscclIrString(std::string_view xml, std::string_view sourceName) {
  ErrorList errors;
  if (xml.size() > kMaxIrFileBytes) {
    errors.add(0, "<document>", absl::StrCat("file is ", xml.size(), " bytes, more than the ", kMaxIrFileBytes, " accepted"));
    return failure(errors.take());
  }
  Parser parser(xml, errors);
  std::optional<Program> p = parser.run();
  if (!p) return failure(errors.take());
  if (p->name.empty()) p->name = std::string(sourceName);
  std::vector<LoadError> problems = validateProgram(*p);
  if (!problems.empty()) return failure(std::move(problems));
  markPostOps(*p);  // MSCCL-IR has no attribute for it; a program too large to replay keeps none
  p->minConnectorSlots = minConnectorSlots(*p);
  return {std::move(p), {}, parser.warnings()};
}

LoadResult loadMscclIrFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return failure({{0, "<document>", absl::StrCat("cannot open '", path, "'")}});
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0) return failure({{0, "<document>", absl::StrCat("cannot read '", path, "'")}});
  if (static_cast<uint64_t>(size) > kMaxIrFileBytes)
    return failure({{0, "<document>",
                     absl::StrCat("'", path, "' is ", size, " bytes, more than the ", kMaxIrFileBytes, " accepted")}});
  std::string data(static_cast<size_t>(size), '\0');
  in.seekg(0);
  if (!in.read(data.data(), size)) return failure({{0, "<document>", absl::StrCat("cannot read '", path, "'")}});
  return loadMscclIrString(data, path);
}

}  // namespace occl::ir
