#include "generator.h"

#include <ATen/EmptyTensor.h>
#include <ATen/core/DistributionsHelper.h>
#include <ATen/core/dispatch/Dispatcher.h>
#include <torch/library.h>

#include <cstdlib>
#include <cstring>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "../runtime/device.h"
#include "allocator.h"
#include "errors.h"

namespace torchneuron {

// ---- the 16-byte state ------------------------------------------------------
// TorchNeuron's generator state is CUDA's philox layout, seed (uint64) then
// offset (uint64). The engine here is the CPU's mt19937 (so every draw is the
// CPU's for one seed), whose own state is 2.5 KB plus the CPUGeneratorImpl's
// cached normal samples. Everything in it is a function of the seed, the
// number of 32-bit numbers drawn since seeding, and, when the engine holds a
// cached double normal (the sin half of the last Box-Muller pair a serial
// normal kernel drew), where that pair was drawn. So the offset is
//   bits 0..47   N, the 32-bit draws since seeding (random64 is two draws);
//   bit 63       0 (the offset is a non-negative int64, as CUDA's is);
//   bits 48..62  D: 0 no cached sample; 1..0x7FFE the cached sample is the
//                pair of draws ending D-1 draws before N; 0x7FFF a cached
//                sample these bytes cannot place (a float normal, which no
//                CPU kernel caches today, a pair more than one 624-draw block
//                back when the state was taken, or N beyond 2^48).
// get_state counts N by running the mt19937 state recurrence (twist) from
// where this generator last looked until it reaches the engine's state array:
// about 1 us per 624 draws made since the previous get_state (the draws
// themselves cost more). Every handed-out state goes into a process-wide memo
// (the last kMemoCapacity), so set_state of one is O(1); any other state is
// rebuilt from the seed with N/624 twists (the cost is in the limit message
// below); D = 0x7FFF states can only come from the memo, and two of them with
// one seed and count (cached samples from different pairs) share its entry:
// the later one handed out is what both restore.
namespace {

constexpr int kStateN = at::MERSENNE_STATE_N;
constexpr int kStateM = at::MERSENNE_STATE_M;
using Block = std::array<uint32_t, kStateN>;
constexpr int kCountBits = 48;
constexpr uint64_t kCountMask = (uint64_t{1} << kCountBits) - 1;
constexpr uint64_t kCacheOpaque = 0x7FFF;
constexpr size_t kMemoCapacity = 1024;
constexpr int64_t kStateBytes = 16;
// A state never handed out is rebuilt from its seed: N/624 twists. Beyond
// this many draws (about a minute of twisting) set_state refuses rather than
// stall the process on a malformed state.
constexpr uint64_t kRebuildMaxDraws = uint64_t{1} << 36;
// An old (CPU-format) state is accepted when its array is this many twists
// or fewer from its seed's.
constexpr uint64_t kLegacyMaxTwists = uint64_t{1} << 20;

Block seeded_block(uint64_t seed) { return at::mt19937(seed).data().state_; }

// at::mt19937_engine::next_state on a copy of the state array.
void twist(Block& s) {
  auto tw = [](uint32_t u, uint32_t v) {
    return ((((u & at::UMASK) | (v & at::LMASK))) >> 1) ^ (v & 1 ? at::MATRIX_A : 0);
  };
  int j = 0;
  for (; j < kStateN - kStateM; ++j) s[j] = s[j + kStateM] ^ tw(s[j], s[j + 1]);
  for (; j < kStateN - 1; ++j) s[j] = s[j + kStateM - kStateN] ^ tw(s[j], s[j + 1]);
  s[kStateN - 1] = s[kStateM - 1] ^ tw(s[kStateN - 1], s[0]);
}

uint32_t temper(uint32_t y) {
  y ^= (y >> 11);
  y ^= (y << 7) & 0x9d2c5680;
  y ^= (y << 15) & 0xefc60000;
  y ^= (y >> 18);
  return y;
}

// Draws four numbers into at::normal_distribution<double> as the CPU
// generator would hand them, and keeps the sample it caches.
struct PairRng {
  const uint32_t* next;
  std::optional<double> cached;
  uint32_t random() { return *next++; }
  uint64_t random64() {
    const uint32_t hi = *next++;
    const uint32_t lo = *next++;
    return (static_cast<uint64_t>(hi) << 32) | lo;
  }
  std::optional<double> next_double_normal_sample() { return std::nullopt; }
  void set_next_double_normal_sample(std::optional<double> v) { cached = v; }
};

double cached_normal_of(const uint32_t (&draws)[4]) {
  PairRng rng{draws, std::nullopt};
  at::normal_distribution<double> normal(0.0, 1.0);
  (void)normal(&rng);
  return *rng.cached;
}

uint64_t bits_of(double v) {
  uint64_t b = 0;
  std::memcpy(&b, &v, sizeof(b));
  return b;
}

uint64_t twists_for(uint64_t n) { return n == 0 ? 0 : (n - 1) / kStateN + 1; }

struct Snapshot {
  at::mt19937_data_pod pod;
  std::optional<double> dbl;
  std::optional<float> flt;
  NeuronGeneratorImpl::Position pos;
};

struct Memo {
  std::mutex mutex;
  std::map<std::pair<uint64_t, uint64_t>, Snapshot> entries;
  std::deque<std::pair<uint64_t, uint64_t>> order;
};

Memo& memo() {
  static Memo* m = new Memo();  // never destroyed: generators may be used during exit
  return *m;
}

void memo_put(uint64_t seed, uint64_t offset, Snapshot snap) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  const auto key = std::make_pair(seed, offset);
  auto it = m.entries.find(key);
  if (it != m.entries.end()) {
    it->second = std::move(snap);
    return;
  }
  m.entries.emplace(key, std::move(snap));
  m.order.push_back(key);
  while (m.order.size() > kMemoCapacity) {
    m.entries.erase(m.order.front());
    m.order.pop_front();
  }
}

std::optional<Snapshot> memo_get(uint64_t seed, uint64_t offset) {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  auto it = m.entries.find(std::make_pair(seed, offset));
  if (it == m.entries.end()) return std::nullopt;
  return it->second;
}

}  // namespace

void clear_rng_state_memo() {
  Memo& m = memo();
  std::lock_guard<std::mutex> lock(m.mutex);
  m.entries.clear();
  m.order.clear();
}

namespace {

const char* kFormat =
    "a neuron generator state is 16 bytes (torch.uint8 on CPU), TorchNeuron's and CUDA's philox layout: the seed "
    "(uint64, little endian) then the offset (uint64), as torch.neuron.get_rng_state() returns it (an 8-byte state "
    "is a seed with offset 0)";

}  // namespace

NeuronGeneratorImpl::NeuronGeneratorImpl(c10::DeviceIndex device, uint64_t seed)
    : c10::GeneratorImpl(c10::Device(c10::DeviceType::PrivateUse1, device),
                         c10::DispatchKeySet(c10::DispatchKey::PrivateUse1)),
      engine_(at::make_generator<at::CPUGeneratorImpl>(seed)) {
  reset_position();
}

void NeuronGeneratorImpl::reset_position() const {
  pos_ = Position();
  pos_.seed = cpu()->current_seed();
  pos_.cur = seeded_block(pos_.seed);
}

void NeuronGeneratorImpl::set_current_seed(uint64_t seed) {
  std::lock_guard<std::mutex> lock(cpu()->mutex_);
  engine_.set_current_seed(seed);
  reset_position();
}

uint64_t NeuronGeneratorImpl::seed() {
  std::lock_guard<std::mutex> lock(cpu()->mutex_);
  const uint64_t s = engine_.seed();
  reset_position();
  return s;
}

uint64_t NeuronGeneratorImpl::current_seed() const { return cpu()->current_seed(); }

uint64_t NeuronGeneratorImpl::describe(const std::optional<uint64_t>& twist_limit) const {
  at::CPUGeneratorImpl* g = cpu();
  const at::mt19937_data_pod pod = g->engine().data();
  // A seed other than the one last looked at, or a freshly seeded engine (next_ is 0 only before the first
  // draw): count from the seed's array.
  if (pod.seed_ != pos_.seed || pod.next_ == 0) reset_position();
  const uint64_t limit = twist_limit.value_or(kCountMask / kStateN + 2);
  uint64_t budget = limit;
  while (pod.state_ != pos_.cur) {
    TORCH_CHECK(budget-- > 0, "neuron generator: the engine's mt19937 state is not within ", limit,
                " regenerations of its seed's (", pos_.seed, "), so it has no (seed, offset) form");
    pos_.prev = pos_.cur;
    twist(pos_.cur);
    ++pos_.twists;
  }
  const uint64_t n = pos_.twists == 0 ? 0 : kStateN * (pos_.twists - 1) + pod.next_;
  uint64_t d = 0;
  const std::optional<double> dbl = g->next_double_normal_sample();
  if (dbl.has_value()) {
    const uint64_t cb = bits_of(*dbl);
    if (!(pos_.cache_bits == cb && pos_.cache_end <= n)) {
      // The pair behind a new cached sample: search the draws this generator
      // still has (the current and previous 624-draw blocks), newest first.
      pos_.cache_bits.reset();
      const uint64_t have = pos_.twists == 0 ? 0 : kStateN * (pos_.twists - (pos_.prev && pos_.twists >= 2 ? 2 : 1));
      auto draw = [&](uint64_t p) {
        const uint64_t t = p / kStateN + 1;
        return temper((t == pos_.twists ? pos_.cur : *pos_.prev)[p % kStateN]);
      };
      for (uint64_t end = n; end >= have + 4 && end >= 4; --end) {
        const uint32_t draws[4] = {draw(end - 4), draw(end - 3), draw(end - 2), draw(end - 1)};
        if (bits_of(cached_normal_of(draws)) == cb) {
          pos_.cache_bits = cb;
          pos_.cache_end = end;
          break;
        }
      }
    }
    d = pos_.cache_bits.has_value() && n - pos_.cache_end + 1 < kCacheOpaque ? n - pos_.cache_end + 1 : kCacheOpaque;
  } else {
    pos_.cache_bits.reset();
  }
  if (g->next_float_normal_sample().has_value() || n > kCountMask) d = kCacheOpaque;
  const uint64_t offset = (n & kCountMask) | (d << kCountBits);
  memo_put(pod.seed_, offset, Snapshot{pod, dbl, g->next_float_normal_sample(), pos_});
  return offset;
}

void NeuronGeneratorImpl::restore(uint64_t seed, uint64_t offset) {
  at::CPUGeneratorImpl* g = cpu();
  auto apply = [&](const at::mt19937_data_pod& pod, std::optional<double> dbl, std::optional<float> flt) {
    at::mt19937 e;
    e.set_data(pod);
    g->set_engine(e);
    g->set_next_double_normal_sample(dbl);
    g->set_next_float_normal_sample(flt);
  };
  if (auto snap = memo_get(seed, offset)) {
    apply(snap->pod, snap->dbl, snap->flt);
    pos_ = snap->pos;
    return;
  }
  TORCH_CHECK((offset >> 63) == 0, "neuron generator state (seed ", seed, ", offset ", offset, "): the offset's bit 63 "
              "is set, but offsets are non-negative int64 values; ", kFormat);
  const uint64_t d = offset >> kCountBits;
  const uint64_t n = offset & kCountMask;
  TORCH_CHECK(d != kCacheOpaque, "neuron generator state (seed ", seed, ", offset ", offset, "): its bits 48..62 "
              "(0x7FFF) mark a state holding a cached normal sample that 16 bytes cannot place; such a state can only "
              "be restored in the process that handed it out, while it is among the last ", kMemoCapacity,
              " states handed out, and this one is not");
  TORCH_CHECK(n <= kRebuildMaxDraws, "neuron generator state (seed ", seed, ", offset ", offset, "): it counts ", n,
              " draws since seeding; a state not handed out by this process is rebuilt from its seed at about 1 us "
              "per 624 draws, so at most 2^36 (", kRebuildMaxDraws, ") draws are accepted (", kFormat, ")");
  std::optional<uint64_t> end;
  if (d != 0) {
    TORCH_CHECK(d - 1 + 4 <= n, "neuron generator state (seed ", seed, ", offset ", offset, "): its bits 48..62 (",
                d, ") place a cached normal sample's draws before the first draw; ", kFormat);
    end = n - (d - 1);
  }
  const uint64_t twists = twists_for(n);
  Block b = seeded_block(seed);
  std::optional<Block> prev;
  uint32_t pair[4] = {0, 0, 0, 0};
  auto fill = [&](uint64_t t) {
    if (!end) return;
    for (uint64_t i = 0; i < 4; ++i) {
      const uint64_t p = *end - 4 + i;
      if (p / kStateN + 1 == t) pair[i] = temper(b[p % kStateN]);
    }
  };
  for (uint64_t t = 1; t <= twists; ++t) {
    prev = b;
    twist(b);
    fill(t);
  }
  at::mt19937_data_pod pod = at::mt19937(seed).data();
  pod.state_ = b;
  pod.next_ = twists == 0 ? 0 : static_cast<uint32_t>(n - kStateN * (twists - 1));
  pod.left_ = twists == 0 ? 1 : kStateN + 1 - static_cast<int>(pod.next_);
  std::optional<double> dbl;
  if (end) dbl = cached_normal_of(pair);
  apply(pod, dbl, std::nullopt);
  pos_ = Position();
  pos_.seed = seed;
  pos_.twists = twists;
  pos_.cur = b;
  pos_.prev = prev;
  if (dbl) {
    pos_.cache_bits = bits_of(*dbl);
    pos_.cache_end = *end;
  }
  memo_put(seed, offset, Snapshot{pod, dbl, std::nullopt, pos_});
}

void NeuronGeneratorImpl::set_offset(uint64_t offset) {
  std::lock_guard<std::mutex> lock(cpu()->mutex_);
  restore(cpu()->current_seed(), offset);
}

uint64_t NeuronGeneratorImpl::get_offset() const {
  std::lock_guard<std::mutex> lock(cpu()->mutex_);
  return describe(std::nullopt);
}

void NeuronGeneratorImpl::set_state(const c10::TensorImpl& new_state) {
  TORCH_CHECK_TYPE(new_state.layout() == c10::kStrided && new_state.device().type() == c10::DeviceType::CPU &&
                       new_state.dtype() == caffe2::TypeMeta::Make<uint8_t>(),
                   "neuron generator state must be a torch.ByteTensor on CPU, got ", new_state.dtype(), " on ",
                   new_state.device(), "; ", kFormat);
  const int64_t size = new_state.numel();
  static const int64_t legacy_size = at::CPUGeneratorImpl().get_state()->numel();
  TORCH_CHECK(size == kStateBytes || size == 8 || size == legacy_size, "neuron generator state has ", size,
              " bytes; ", kFormat, ". (A ", legacy_size, "-byte CPU generator state, the format neuron generators "
              "used before, is also accepted.)");
  TORCH_CHECK(new_state.is_contiguous(), "neuron generator state must be contiguous; ", kFormat);
  const auto* bytes = static_cast<const uint8_t*>(new_state.data());
  std::lock_guard<std::mutex> lock(cpu()->mutex_);
  if (size == legacy_size) {
    // The CPU generator's own format: take it as the CPU would (it checks it),
    // then find its draw count so get_state can describe it in 16 bytes.
    at::CPUGeneratorImpl* g = cpu();
    const at::mt19937 old_engine = g->engine();
    const auto old_dbl = g->next_double_normal_sample();
    const auto old_flt = g->next_float_normal_sample();
    const Position old_pos = pos_;
    try {
      g->set_state(new_state);
      reset_position();
      (void)describe(kLegacyMaxTwists);
    } catch (...) {
      g->set_engine(old_engine);
      g->set_next_double_normal_sample(old_dbl);
      g->set_next_float_normal_sample(old_flt);
      pos_ = old_pos;
      throw;
    }
    return;
  }
  uint64_t seed = 0;
  uint64_t offset = 0;
  for (int i = 7; i >= 0; --i) seed = (seed << 8) | bytes[i];
  if (size == kStateBytes) {
    for (int i = 15; i >= 8; --i) offset = (offset << 8) | bytes[i];
  }
  restore(seed, offset);
}

c10::intrusive_ptr<c10::TensorImpl> NeuronGeneratorImpl::get_state() const {
  uint64_t seed = 0;
  uint64_t offset = 0;
  {
    std::lock_guard<std::mutex> lock(cpu()->mutex_);
    seed = cpu()->current_seed();
    offset = describe(std::nullopt);
  }
  at::TensorBase state = at::detail::empty_cpu({kStateBytes}, c10::ScalarType::Byte, std::nullopt, std::nullopt,
                                               std::nullopt, std::nullopt);
  auto* out = state.data_ptr<uint8_t>();
  for (int i = 0; i < 8; ++i) {
    out[i] = static_cast<uint8_t>(seed >> (8 * i));
    out[8 + i] = static_cast<uint8_t>(offset >> (8 * i));
  }
  return state.getIntrusivePtr();
}

void NeuronGeneratorImpl::graphsafe_set_state(const c10::intrusive_ptr<c10::GeneratorImpl>& state) {
  auto* other = dynamic_cast<NeuronGeneratorImpl*>(state.get());
  TORCH_CHECK(other != nullptr, "graphsafe_set_state on a neuron generator expects the state of a neuron generator "
              "(from graphsafe_get_state), got one of device ", state->device());
  if (other == this) return;
  std::lock(cpu()->mutex_, other->cpu()->mutex_);
  std::lock_guard<std::mutex> a(cpu()->mutex_, std::adopt_lock);
  std::lock_guard<std::mutex> b(other->cpu()->mutex_, std::adopt_lock);
  cpu()->set_engine(other->cpu()->engine());
  cpu()->set_next_double_normal_sample(other->cpu()->next_double_normal_sample());
  cpu()->set_next_float_normal_sample(other->cpu()->next_float_normal_sample());
  pos_ = other->pos_;
}

c10::intrusive_ptr<c10::GeneratorImpl> NeuronGeneratorImpl::graphsafe_get_state() const { return clone(); }

NeuronGeneratorImpl* NeuronGeneratorImpl::clone_impl() const {
  auto* g = new NeuronGeneratorImpl(device_.index());
  std::lock_guard<std::mutex> lock(cpu()->mutex_);
  g->engine_ = engine_.clone();
  g->pos_ = pos_;
  return g;
}

namespace {
// One per device index, whatever the numbering (a distributed job numbers its core
// neuron:LOCAL_RANK); check_device_index keeps callers to this process's own cores.
std::vector<at::Generator>& generator_table() {
  static std::vector<at::Generator>* generators = [] {
    auto* v = new std::vector<at::Generator>();
    for (int i = 0; i < neuron_rt::kMaxCores; ++i)
      v->push_back(at::make_generator<NeuronGeneratorImpl>(static_cast<c10::DeviceIndex>(i)));
    return v;
  }();
  return *generators;
}

// torch.manual_seed before init_process_group seeds the core under its old index; the seed follows it.
void carry_seeds_over(int old_first, int new_first, int count) {
  auto& table = generator_table();
  for (int k = 0; k < count; ++k) {
    const int i = new_first > old_first ? count - 1 - k : k;  // overlapping ranges: never read a copied slot
    table[new_first + i].unsafeGetGeneratorImpl()->graphsafe_set_state(table[old_first + i].getIntrusivePtr());
  }
}

struct SeedCarrier {
  SeedCarrier() { neuron_rt::add_renumber_observer(&carry_seeds_over); }
} seed_carrier;
}  // namespace

const at::Generator& default_generator(c10::DeviceIndex device) {
  if (device < 0) device = static_cast<c10::DeviceIndex>(neuron_rt::current_device());
  guarded([&] { neuron_rt::check_device_index(device); });
  return generator_table()[device];
}

at::Generator new_generator(c10::DeviceIndex device) {
  if (device < 0) device = static_cast<c10::DeviceIndex>(neuron_rt::current_device());
  guarded([&] { neuron_rt::check_device_index(device); });
  return at::make_generator<NeuronGeneratorImpl>(device);
}

// Read on first use, which the runtime's initialisation forces (the first use
// of a neuron device), not when the library loads: a pytest plugin or a
// launcher may set it after importing torchneuron_ext, as with NEURON_RT_*.
bool draws_from_cpu_generator() {
  static const int g_rng_source = env_choice("TORCHNEURON_EXT_RNG", {"device", "cpu"});
  if (C10_UNLIKELY(g_rng_source < 0)) {
    throw_bad_env_choice("TORCHNEURON_EXT_RNG", "a random-number source",
                         "'device' (the default: each neuron device has its own generator, as on CUDA) or 'cpu' "
                         "(random ops on neuron draw from the CPU's default generator, as TorchNeuron's "
                         "CPU-fallback random ops do).");
  }
  return g_rng_source == 1;
}

const char* rng_source_name() { return draws_from_cpu_generator() ? "cpu" : "device"; }

at::Generator host_engine_for(const std::optional<at::Generator>& gen, c10::DeviceIndex device) {
  if (!gen.has_value() || !gen->defined()) {
    if (draws_from_cpu_generator()) return at::detail::getDefaultCPUGenerator();
    return static_cast<NeuronGeneratorImpl*>(default_generator(device).unsafeGetGeneratorImpl())->engine();
  }
  TORCH_CHECK(gen->device().type() == c10::DeviceType::PrivateUse1,
              "Expected a 'neuron' device type for generator but found '", gen->device().type(),
              "'. Create it with torch.Generator(device=\"neuron\").");
  return static_cast<NeuronGeneratorImpl*>(gen->unsafeGetGeneratorImpl())->engine();
}


// ---- the device-RNG redirect behind DeviceRngScope ------------------------
// PyTorch internal relied on (listed in docs/architecture.md with the Python
// ones in torchneuron_ext/_torch_internals.py): the dispatch key
// TESTING_ONLY_GenericMode, which PyTorch reserves for tests and never
// registers itself. It is a mode key: above every functionality key, and in
// no composite alias set, so while the scope includes it in this thread's
// dispatch keys only the kernels below see it: a fallthrough for every
// operator, and, for the aten operators with a Generator argument, a kernel
// that fills a missing generator with the scope's engine. A CustomRNGKeyId
// (the documented custom-RNG key) would not do: it is in the composite alias
// sets, so composite kernels would shadow the CPU kernels inside the scope.
// A torch upgrade that drops the key fails to compile here; one that adds it
// to an alias set, or registers it itself, makes the first random kernel
// raise, naming the internal (registration_error below).
namespace {

constexpr c10::DispatchKey kDeviceRngKey = c10::DispatchKey::TESTING_ONLY_GenericMode;

thread_local const at::Generator* tls_device_engine = nullptr;

bool takes_generator(const c10::TypePtr& type) {
  if (type->kind() == c10::TypeKind::GeneratorType) return true;
  return type->kind() == c10::TypeKind::OptionalType &&
         type->castRaw<c10::OptionalType>()->getElementType()->kind() == c10::TypeKind::GeneratorType;
}

void draw_from_device_engine(const c10::OperatorHandle& op, c10::DispatchKeySet ks, torch::jit::Stack* stack) {
  const auto& args = op.schema().arguments();
  const size_t base = stack->size() - args.size();
  if (tls_device_engine != nullptr) {
    for (size_t i = 0; i < args.size(); ++i) {
      c10::IValue& v = (*stack)[base + i];
      if (takes_generator(args[i].type()) && (v.isNone() || !v.toGenerator().defined())) {
        v = c10::IValue(*tls_device_engine);
      }
    }
  }
  op.redispatchBoxed(ks & c10::DispatchKeySet(c10::DispatchKeySet::FULL_AFTER, kDeviceRngKey), stack);
}

void register_redirect() {
  for (const auto alias : {c10::DispatchKey::CompositeImplicitAutograd, c10::DispatchKey::CompositeExplicitAutograd,
                           c10::DispatchKey::CompositeExplicitAutogradNonFunctional, c10::DispatchKey::Autograd}) {
    TORCH_CHECK(!c10::isIncludedInAlias(kDeviceRngKey, alias), "dispatch key ", kDeviceRngKey,
                " is now in the alias set ", alias, ", so composite kernels would replace CPU kernels inside "
                "random neuron kernels");
  }
  static torch::Library fallthrough(torch::Library::IMPL, "_", kDeviceRngKey, __FILE__, __LINE__);
  fallthrough.fallback(torch::CppFunction::makeFallthrough());
  static torch::Library redirect(torch::Library::IMPL, "aten", kDeviceRngKey, __FILE__, __LINE__);
  auto& dispatcher = c10::Dispatcher::singleton();
  for (const auto& name : dispatcher.getAllOpNames()) {
    if (name.name.rfind("aten::", 0) != 0) continue;
    auto op = dispatcher.findOp(name);
    if (!op.has_value() || !op->hasSchema()) continue;
    bool random = false;
    for (const auto& arg : op->schema().arguments()) random = random || takes_generator(arg.type());
    if (!random) continue;
    const std::string full = name.overload_name.empty() ? name.name : name.name + "." + name.overload_name;
    redirect.impl(full.c_str(), torch::CppFunction::makeFromBoxedFunction<&draw_from_device_engine>());
  }
}

// Registered at load, before any kernel runs (the dispatcher's tables must
// not change under threads that are dispatching). A failure must not throw
// out of a static initializer (that terminates the importing process), so
// it is kept and raised by the first random kernel.
const std::string registration_error = [] {
  try {
    register_redirect();
    return std::string();
  } catch (const std::exception& e) {
    return std::string(e.what());
  }
}();

}  // namespace

DeviceRngScope::DeviceRngScope(c10::DeviceIndex device)
    : engine_(host_engine_for(std::nullopt, device)), outer_(tls_device_engine), redirect_(kDeviceRngKey) {
  TORCH_CHECK(registration_error.empty(), "torchneuron_ext relies on a PyTorch internal that this torch breaks: C2 "
              "device-RNG redirect (csrc/backend/generator.cpp; see torchneuron_ext/_torch_internals.py). "
              "Registering it failed: ", registration_error, ". Update generator.cpp to another unregistered "
              "mode key.");
  tls_device_engine = &engine_;
  // A Python dispatch mode's __torch_dispatch__ runs with every key above
  // Python excluded, this one too, and an exclusion beats an inclusion: under
  // AOTAutograd's first-run mode (or any TorchDispatchMode) the CPU kernel's
  // draws went to the CPU generator. Only this key is let through; the
  // Python keys stay excluded.
  unexcluded_ = c10::impl::tls_is_dispatch_key_excluded(kDeviceRngKey);
  if (unexcluded_) c10::impl::tls_set_dispatch_key_excluded(kDeviceRngKey, false);
}

DeviceRngScope::~DeviceRngScope() {
  if (unexcluded_) c10::impl::tls_set_dispatch_key_excluded(kDeviceRngKey, true);
  tls_device_engine = outer_;
}

}  // namespace torchneuron
