// torch.save files read without Python (core/torch_checkpoint.h, core/torch_pickle.h), held to golden files torch
// 2.15 wrote (tests/reference/make_torch_bin_golden.py): every tensor of the zip format (pickle protocols 2 and 4)
// and the legacy format equals the reference safetensors bit for bit — every dtype, a 0-d and an empty tensor,
// strided views (transposed, a column, a row slice at a storage offset), tied names, a Parameter, uint16 through
// _rebuild_tensor_v3; bert_tiny's weights as pytorch_model.bin (zip) and as legacy shards with transformers' index
// embed exactly as its model.safetensors, retro-train --init-from a RETRO-pytorch state_dict .pt starts where its
// safetensors does (also from a research checkpoint {"model": ..., "args": Namespace, "step": ...}), and LaBSE's
// Dense module as pytorch_model.bin as its safetensors; a pickle naming os.system reads its tensor and leaves the
// object out (nothing runs), research checkpoints give the state_dict under "model", a file without tensors and an
// expanded view are refused in one line; files without CRC, with a non-tensor _extra_state, from Python 2, and one
// view under two names read (a negated view and a complex tensor left out naming why, a view whose size wraps 64
// bits refused); every truncation and random byte damage is a UserError, never a crash.
#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/fingerprint.h"
#include "core/safetensors.h"
#include "core/torch_checkpoint.h"
#include "core/weights_file.h"
#include "embed/bert_embedder.h"
#include "embed/checkpoint_weights.h"
#include "model/config.h"
#include "model/params.h"
#include "test_train_fixtures.h"
#include "test_util.h"
#include "train/init_from.h"

#include <nlohmann/json.hpp>

using namespace retro;
namespace fs = std::filesystem;

namespace {

const fs::path kDir = test::source_dir() / "tests" / "reference" / "golden" / "torch_bin";

std::vector<std::uint8_t> file_bytes(const fs::path& p) {
    const std::string s = test::read_text(p);
    return std::vector<std::uint8_t>(s.begin(), s.end());
}

std::string refusal_of(const std::vector<std::uint8_t>& bytes) {
    try {
        TorchCheckpointFile::from_bytes(bytes.data(), bytes.size(), "x.bin");
    } catch (const UserError& e) {
        return e.what();
    }
    return "(accepted)";
}

std::string refusal_of(const fs::path& p) {
    try {
        TorchCheckpointFile f(p.string());
    } catch (const UserError& e) {
        return e.what();
    }
    return "(accepted)";
}

std::vector<float> embed(const fs::path& dir, const std::vector<std::string>& texts, std::string* fingerprint = nullptr) {
    BertEmbedderOptions o;
    o.model_dir = dir.string();
    BertEmbedder e(o, nullptr);
    std::vector<float> out(texts.size() * e.dim());
    e.embed_texts(texts, out.data());
    if (fingerprint) *fingerprint = e.fingerprint();
    return out;
}

}  // namespace

TEST_CASE("torch checkpoint: zip (protocols 2, 4) and legacy files read back every tensor bit for bit") {
    const SafetensorsFile ref((kDir / "reference.safetensors").string());
    for (const std::string name : {"zip_p2.bin", "zip_p4.bin", "legacy.bin"}) {
        CAPTURE(name);
        const bool legacy = name == "legacy.bin";
        const TorchCheckpointFile f((kDir / name).string());
        CHECK(f.tensors().size() == ref.tensors().size() - (legacy ? 1 : 0));   // legacy has no uint16
        for (const auto& [tensor, want] : ref.tensors()) {
            CAPTURE(tensor);
            if (legacy && tensor == "uint16") continue;
            REQUIRE(f.has(tensor));
            const TensorView& got = f.get(tensor);
            CHECK(dtype_name(got.dtype) == dtype_name(want.dtype));
            CHECK(got.shape == want.shape);
            REQUIRE(got.bytes == want.bytes);
            if (want.bytes) CHECK(std::memcmp(got.data, want.data, want.bytes) == 0);
        }
        // tied names share one storage's bytes (no copy); a contiguous slice points into its base's storage
        CHECK(f.get("tied").data == f.get("dense.weight").data);
        CHECK(static_cast<const float*>(f.get("rows_2_4").data) == static_cast<const float*>(f.get("base").data) + 14);
        CHECK(f.get("scalar").shape.empty());
        CHECK(f.get("empty").bytes == 0);
        CHECK_THROWS_AS(f.get("missing"), UserError);
    }
}

TEST_CASE("torch checkpoint: bert_tiny as pytorch_model.bin and as legacy shards embeds as its model.safetensors") {
    const fs::path golden = test::source_dir() / "tests" / "reference" / "golden" / "bert_tiny";
    const std::vector<std::string> texts = {"hello world", "the lazy dog sleeps in the sun", "a"};
    std::string fp_st, fp_bin, fp_sharded;
    const std::vector<float> want = embed(golden, texts, &fp_st);
    CHECK(embed(kDir / "bert_tiny_bin", texts, &fp_bin) == want);
    CHECK(embed(kDir / "bert_tiny_bin_sharded", texts, &fp_sharded) == want);
    // the fingerprints are the files' own (the index's and its shards' joined where sharded), as for safetensors
    CHECK(fp_bin == fingerprint_file((kDir / "bert_tiny_bin" / "pytorch_model.bin").string()));
    const fs::path s = kDir / "bert_tiny_bin_sharded";
    const std::string joined = fingerprint_file((s / "pytorch_model.bin.index.json").string()) + " " +
                               fingerprint_file((s / "pytorch_model-00001-of-00002.bin").string()) + " " +
                               fingerprint_file((s / "pytorch_model-00002-of-00002.bin").string());
    CHECK(fp_sharded == fingerprint_bytes(joined.data(), joined.size()));
    CHECK(fp_bin != fp_st);

    // model.safetensors wins where a folder holds both, as in transformers
    test::TempDir tmp("torchbin");
    fs::copy(kDir / "bert_tiny_bin", tmp.path / "both");
    fs::copy_file(golden / "model.safetensors", tmp.path / "both" / "model.safetensors");
    CHECK(CheckpointWeights::path_of((tmp.path / "both").string()) == (tmp.path / "both" / "model.safetensors").string());
    std::string fp_both;
    CHECK(embed(tmp.path / "both", texts, &fp_both) == want);
    CHECK(fp_both == fp_st);

    // a shard the index names but the folder lacks: one line naming it
    fs::copy(s, tmp.path / "partial");
    fs::remove(tmp.path / "partial" / "pytorch_model-00002-of-00002.bin");
    try {
        CheckpointWeights w((tmp.path / "partial").string(), "a test folder");
        FAIL("accepted a missing shard");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()).find("pytorch_model-00002-of-00002.bin: missing") != std::string::npos);
    }
}

TEST_CASE("torch checkpoint: a sentence-transformers Dense module saved as pytorch_model.bin (LaBSE's form)") {
    const fs::path golden = test::source_dir() / "tests" / "reference" / "golden";
    test::TempDir tmp("torchbin-dense");
    const fs::path st = tmp / "st", bin = tmp / "bin";
    for (const fs::path& d : {st, bin}) {
        fs::copy(golden / "bert_tiny", d, fs::copy_options::recursive);
        fs::copy(golden / "st_dense" / "labse", d, fs::copy_options::recursive | fs::copy_options::overwrite_existing);
    }
    fs::remove(bin / "2_Dense" / "model.safetensors");
    fs::copy_file(kDir / "labse_dense_bin" / "pytorch_model.bin", bin / "2_Dense" / "pytorch_model.bin");
    const std::vector<std::string> texts = {"hello world", "the lazy dog sleeps in the sun"};
    std::string fp_st, fp_bin;
    CHECK(embed(bin, texts, &fp_bin) == embed(st, texts, &fp_st));
    CHECK(fp_bin != fp_st);   // the Dense weights' file is in the fingerprint
}

TEST_CASE("torch checkpoint: retro-train --init-from a RETRO-pytorch state_dict saved with torch.save") {
    const fs::path golden = test::source_dir() / "tests" / "reference" / "golden" / "retro_tiny";
    const fs::path pt = kDir / "retro_tiny_state_dict.pt";
    const RetroConfig c = RetroConfig::load((golden / "config.json").string());
    const ParamLayout layout(c);
    auto load = [&](const fs::path& base, InitFromInfo& info) {
        info = init_from_resolve(base.string());
        std::vector<float> w;
        params_init(w, layout, 7);
        init_from_load(info, w, layout, c);
        return w;
    };
    InitFromInfo a, b;
    const std::vector<float> from_st = load(golden / "weights.safetensors", a), from_pt = load(pt, b);
    CHECK(from_pt == from_st);
    CHECK(b.copied == static_cast<std::int64_t>(layout.entries().size()));
    CHECK(b.fresh == 0);
    CHECK(b.ignored == a.ignored);
    CHECK(b.fingerprint == fingerprint_file(pt.string()));

    // a state_dict saved through DistributedDataParallel and torch.compile: every name under "module._orig_mod."
    test::TempDir wrapped("torchbin-wrapped");
    {
        const SafetensorsFile plain((golden / "weights.safetensors").string());
        std::vector<TensorToWrite> renamed;
        for (const auto& [name, view] : plain.tensors()) renamed.push_back({"module._orig_mod." + name, view.dtype, view.shape, view.data});
        safetensors_save((wrapped / "ddp.safetensors").string(), renamed);
        InitFromInfo w;
        CHECK(load(wrapped / "ddp.safetensors", w) == from_st);
        CHECK(w.copied == a.copied);
        CHECK(w.ignored == a.ignored);
        // only some names under the prefix: not a wrapper's, so the decoder's names are missing
        renamed.push_back({"extra", DType::F32, {1}, renamed.front().data});
        safetensors_save((wrapped / "mixed.safetensors").string(), renamed);
        CHECK_THROWS_AS(load(wrapped / "mixed.safetensors", w), UserError);
        // a LightningModule holding the model as self.retro: every name under "retro."
        renamed.clear();
        for (const auto& [name, view] : plain.tensors()) renamed.push_back({"retro." + name, view.dtype, view.shape, view.data});
        safetensors_save((wrapped / "lightning.safetensors").string(), renamed);
        CHECK(load(wrapped / "lightning.safetensors", w) == from_st);
    }

    // params_load (retro-generate --checkpoint, retro-train eval --weights): the .pt, the research checkpoint and the
    // module.-prefixed copy give the safetensors' parameters bit for bit
    std::vector<float> p_st, p_pt, p_ck, p_ddp;
    params_load((golden / "weights.safetensors").string(), p_st, layout, c);
    params_load(pt.string(), p_pt, layout, c);
    params_load((kDir / "retro_tiny_checkpoint.pt").string(), p_ck, layout, c);
    params_load((wrapped / "ddp.safetensors").string(), p_ddp, layout, c);
    CHECK(p_pt == p_st);
    CHECK(p_ck == p_st);
    CHECK(p_ddp == p_st);
    for (const DType half : {DType::BF16, DType::F16}) {   // a model.half() (or bfloat16) state_dict: widened exactly
        CAPTURE(dtype_name(half));
        const SafetensorsFile plain((golden / "weights.safetensors").string());
        std::vector<std::vector<std::uint16_t>> bits;
        bits.reserve(plain.tensors().size());
        std::vector<TensorToWrite> halves;
        for (const auto& [name, view] : plain.tensors()) {
            if (name.find("inv_freq") != std::string::npos) {   // (RP's rotary buffers stay f32)
                halves.push_back({name, view.dtype, view.shape, view.data});
                continue;
            }
            const auto* f = static_cast<const float*>(view.data);
            bits.emplace_back(static_cast<std::size_t>(view.numel()));
            for (std::size_t i = 0; i < bits.back().size(); i++)
                bits.back()[i] = half == DType::BF16 ? f32_to_bf16(f[i]) : f32_to_f16(f[i]);
            halves.push_back({name, half, view.shape, bits.back().data()});
        }
        test::TempDir tmp("torchbin-half");
        safetensors_save((tmp / "half.safetensors").string(), halves);
        std::vector<float> p_half;
        params_load((tmp / "half.safetensors").string(), p_half, layout, c);
        REQUIRE(p_half.size() == p_st.size());
        bool exact = true;
        for (std::size_t i = 0; i < p_st.size(); i++)
            exact = exact && p_half[i] == (half == DType::BF16 ? bf16_to_f32(f32_to_bf16(p_st[i])) : f16_to_f32(f32_to_f16(p_st[i])));
        CHECK(exact);
    }
    {   // RP's weights under a config with other `heads` (RP 0.3.9 builds 8 whatever it says): the fix names that
        REQUIRE(c.heads == 8);
        RetroConfig four = c;
        four.heads = 4;
        std::vector<float> p4;
        CHECK_THROWS_WITH_AS(params_load(pt.string(), p4, ParamLayout(four), four),
                             doctest::Contains("RETRO-pytorch builds 8 heads whatever its `heads` says; set \"heads\": 8"),
                             UserError);
        RetroConfig wider = c;   // another width: no such hint
        wider.dim_head = c.dim_head * 2;
        CHECK_THROWS_WITH_AS(params_load(pt.string(), p4, ParamLayout(wider), wider),
                             doctest::Contains("(fix: the weights were made for another model config)"), UserError);
    }

    // the tool: every tensor copied, none fresh, and the first loss is the base's own
    test::TempDir dir("torchbin-initfrom");
    test::write_tiny_db(dir / "db", dir / "knn", 4, 16, 12, 9);
    const std::string common = "--db " + (dir / "db").string() + " --knn " + (dir / "knn").string() + " --config " +
                               test::config_path() + " --steps 1 --batch-size 2 --threads 1 --init-from ";
    const auto r1 = test::run_tool("retro-train", common + pt.string() + " --out " + (dir / "pt").string());
    CHECK_MESSAGE(r1.exit_code == 0, r1.err);
    CHECK(r1.err.find(std::to_string(layout.entries().size()) + " tensors copied, 0 fresh") != std::string::npos);
    const auto r2 = test::run_tool("retro-train", common + (golden / "weights.safetensors").string() + " --out " + (dir / "st").string());
    CHECK_MESSAGE(r2.exit_code == 0, r2.err);
    CHECK(test::losses(dir / "pt") == test::losses(dir / "st"));
    // research code's checkpoint: {"model": state_dict, "args": argparse.Namespace, "step": 100}
    const auto r3 = test::run_tool("retro-train", common + (kDir / "retro_tiny_checkpoint.pt").string() + " --out " + (dir / "ck").string());
    CHECK_MESSAGE(r3.exit_code == 0, r3.err);
    CHECK(r3.err.find("(the state_dict under 'model')") != std::string::npos);
    CHECK(r3.err.find("only the weights under 'model' are read, nothing else the file holds (an optimizer's state, a "
                      "step count)") != std::string::npos);
    CHECK(r1.err.find("nothing else the file holds") == std::string::npos);   // (a plain state_dict has nothing else)
    CHECK(test::losses(dir / "ck") == test::losses(dir / "st"));
    CHECK(nlohmann::json::parse(std::ifstream(dir / "ck" / "manifest.json"))["parameters"]["init_from"]["within"] == "model");
    // DDP + torch.compile's names: the prefix logged and recorded
    const auto r4 = test::run_tool("retro-train", common + (wrapped / "ddp.safetensors").string() + " --out " + (dir / "ddp").string());
    CHECK_MESSAGE(r4.exit_code == 0, r4.err);
    CHECK(r4.err.find("(names under 'module._orig_mod.')") != std::string::npos);
    CHECK(test::losses(dir / "ddp") == test::losses(dir / "st"));
    CHECK(nlohmann::json::parse(std::ifstream(dir / "ddp" / "manifest.json"))["parameters"]["init_from"]["prefix"] == "module._orig_mod.");
    // a torch file without tensors: one line, exit 2
    const auto bad = test::run_tool("retro-train", common + (kDir / "no_tensors.bin").string() + " --out " + (dir / "bad").string());
    CHECK(bad.exit_code == 2);
    CHECK(bad.err.find("no_tensors.bin: holds no tensor at its top level, nor a state_dict under 'state_dict', 'model' or the like: "
                       "'args' (the Python object argparse.Namespace), 'epoch' (an int)") != std::string::npos);
}

TEST_CASE("torch checkpoint: nothing in a pickle runs, research checkpoints read, files without tensors refused") {
    // os.system in a pickle: an inert object, left out (the tensor beside it reads); asked for, it is named
    const TorchCheckpointFile evil((kDir / "evil.bin").string());
    CHECK(evil.has("w"));
    CHECK_FALSE(evil.has("x"));
    CHECK(evil.why_not("x") == "the Python object posix.system");
    try {
        evil.get("x");
        FAIL("an object read as a tensor");
    } catch (const UserError& e) {
        CHECK(std::string(e.what()).find("holds 'x' as the Python object posix.system, not a tensor RetroKit reads") != std::string::npos);
    }
    // the state_dict under "model" of a dict without tensors at its top
    const TorchCheckpointFile nested((kDir / "nested.bin").string());
    CHECK(nested.nested_key() == "model");
    CHECK(nested.has("w"));
    const TorchCheckpointFile research((kDir / "research.bin").string());
    CHECK(research.nested_key() == "model");
    CHECK(research.tensors().size() == 2);   // Linear(3, 2): weight, bias (the optimizer's moments not taken)
    CHECK(research.get("weight").shape == std::vector<std::int64_t>{2, 3});
    CHECK(refusal_of(kDir / "no_tensors.bin").find("holds no tensor at its top level") != std::string::npos);
    // a tensor at the top (best_acc1) beside "state_dict", a dict subclass, a defaultdict and a deque: "state_dict"
    const TorchCheckpointFile research2((kDir / "research2.bin").string());
    CHECK(research2.nested_key() == "state_dict");
    CHECK(research2.tensors().size() == 1);
    CHECK(research2.has("a.w"));
    // legacy: a complex tensor's record stepped over beside "model"; a whole module refused
    const TorchCheckpointFile mixed((kDir / "legacy_mixed.bin").string());
    CHECK(mixed.nested_key() == "model");
    CHECK(mixed.get("w").bytes == 12);
    CHECK(refusal_of(kDir / "legacy_module.bin").find("holds a whole nn.Module saved with torch.save(model), not a state_dict") != std::string::npos);
    CHECK(refusal_of(kDir / "expanded.bin").find("expanded view") != std::string::npos);
    CHECK(refusal_of(std::vector<std::uint8_t>{}).find("not a PyTorch weights file") != std::string::npos);
    const std::string text = "just some text, not weights\n";
    CHECK(refusal_of(std::vector<std::uint8_t>(text.begin(), text.end())).find("not a PyTorch weights file") != std::string::npos);
}

TEST_CASE("torch checkpoint: files torch writes less often (no CRC, extra state, Python 2, shared views) and lazy views") {
    auto floats = [](const TensorView& v) {
        std::vector<float> out(v.bytes / 4);
        std::memcpy(out.data(), v.data, v.bytes);
        return out;
    };
    // compute_crc32 = False: the records' CRC-32 is 0 and not checked (torch checks none)
    CHECK(floats(TorchCheckpointFile((kDir / "nocrc.bin").string()).get("w")) == std::vector<float>{0, 1, 2, 3, 4, 5});
    // a module's non-tensor _extra_state is left out; the tensors read
    const TorchCheckpointFile extra((kDir / "extra_state.bin").string());
    CHECK(extra.has("w"));
    CHECK_FALSE(extra.has("_extra_state"));
    // Python 2's legacy pickles: str keys as SHORT_BINSTRING, OrderedDict([[k, v], ...]), OrderedDict([]) hooks
    const TorchCheckpointFile py2((kDir / "py2_legacy.bin").string());
    CHECK(floats(py2.get("a.weight")) == std::vector<float>{0, 1.5f, 3});
    CHECK(floats(py2.get("a.bias")) == std::vector<float>{0, 1.5f});
    // one strided view under two names: one copy, row-major
    const TorchCheckpointFile shared((kDir / "shared_view.bin").string());
    CHECK(shared.get("a").data == shared.get("b").data);
    CHECK(floats(shared.get("a")) == std::vector<float>{0, 4, 8, 1, 5, 9, 2, 6, 10, 3, 7, 11});
    // left out, naming why: a lazily negated view (its bytes are not its values) and a complex tensor; refused: a
    // stride-0 view whose byte count wraps 64 bits (9 x (2^61 + 7)/9 doubles: a size_t product says 56 bytes)
    const TorchCheckpointFile neg((kDir / "neg_view.bin").string()), complex((kDir / "complex.bin").string());
    CHECK(neg.has("w"));
    CHECK(neg.why_not("n").find("a lazily negated or conjugated view (metadata 'neg'") == 0);
    CHECK(complex.has("w"));
    CHECK(complex.why_not("c") == "a tensor of type torch.ComplexFloatStorage");
    CHECK(refusal_of(kDir / "wrap.bin").find("repeats its storage's elements") != std::string::npos);
}

TEST_CASE("torch checkpoint: WeightsFile tells torch files from safetensors by their bytes, not their names") {
    test::TempDir tmp("torchbin-detect");
    // a .safetensors file whose header length starts 0x80 0x02 (as a protocol-2 pickle does): still safetensors
    const float w[3] = {1, 2, 3};
    fs::path st;
    for (int pad = 0; pad < 700 && st.empty(); ++pad) {
        const fs::path p = tmp / ("w" + std::to_string(pad) + ".pt");   // the name says torch; the bytes do not
        safetensors_save(p.string(), {{"w", DType::F32, {3}, w}}, {{"pad", std::string(static_cast<std::size_t>(pad), 'x')}});
        const std::vector<std::uint8_t> b = file_bytes(p);
        if (b[0] == 0x80 && b[1] == 0x02) st = p;
    }
    REQUIRE_FALSE(st.empty());
    const WeightsFile a(st.string());
    CHECK_FALSE(a.is_torch());
    CHECK(a.get("w").bytes == 12);
    // a torch.save file named .safetensors: read as torch
    fs::copy_file(kDir / "legacy.bin", tmp / "legacy.safetensors");
    fs::copy_file(kDir / "zip_p2.bin", tmp / "zip.safetensors");
    CHECK(WeightsFile((tmp / "legacy.safetensors").string()).is_torch());
    CHECK(WeightsFile((tmp / "zip.safetensors").string()).has("dense.weight"));
}

TEST_CASE("torch checkpoint: every truncation and random byte damage is a UserError or reads, never a crash") {
    std::mt19937 rng(43);
    for (const std::string name : {"zip_p2.bin", "legacy.bin", "zip_p4.bin"}) {
        CAPTURE(name);
        const std::vector<std::uint8_t> whole = file_bytes(kDir / name);
        int refused = 0;
        for (std::size_t n = 0; n < whole.size(); ++n) {   // every prefix
            const std::vector<std::uint8_t> cut(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(n));
            if (refusal_of(cut) != "(accepted)") ++refused;
        }
        CHECK(refused == static_cast<int>(whole.size()));   // a truncated file never reads as complete
        for (int trial = 0; trial < 3000; ++trial) {   // one to four damaged bytes; libzip's CRC catches most in data
            std::vector<std::uint8_t> bad = whole;
            const int flips = 1 + trial % 4;
            for (int i = 0; i < flips; ++i) bad[rng() % bad.size()] = static_cast<std::uint8_t>(rng());
            try {
                TorchCheckpointFile::from_bytes(bad.data(), bad.size(), "x.bin");
            } catch (const UserError&) {
            }
        }
    }
}

TEST_CASE("torch checkpoint: tensors are read in place in the file, and a byte flipped anywhere in a zip reads the same or is refused") {
    // contiguous tensors are not copied: a zip record's bytes where libzip finds them (torch aligns them to 64 bytes)
    CHECK(TorchCheckpointFile((kDir / "nocrc.bin").string()).copied_bytes() == 0);
    CHECK(TorchCheckpointFile((kDir / "bert_tiny_bin" / "pytorch_model.bin").string()).copied_bytes() == 0);
    const TorchCheckpointFile zip((kDir / "zip_p2.bin").string()), legacy((kDir / "legacy.bin").string());
    CHECK(zip.copied_bytes() > 0);   // its transposed views and a column, copied into row-major order
    // a legacy stream's storages lie at any offset: those not 8-byte aligned are copied, the rest read in place;
    // every tensor pointer is aligned for its elements either way
    CHECK(legacy.copied_bytes() >= zip.copied_bytes());
    for (const TorchCheckpointFile* f : {&zip, &legacy})
        for (const auto& [name, t] : f->tensors()) {
            CAPTURE(name);
            if (t.bytes) CHECK(reinterpret_cast<std::uintptr_t>(t.data) % dtype_size(t.dtype) == 0);
        }
    // every byte of two zip files flipped in turn: the file is refused, or every tensor reads as before (the
    // records' CRC-32 is checked over the bytes the tensors point at: a flip in a record never reads as data)
    for (const std::string name : {"zip_p2.bin", "zip_p4.bin"}) {
        CAPTURE(name);
        const std::vector<std::uint8_t> whole = file_bytes(kDir / name);
        const TorchCheckpointFile want = TorchCheckpointFile::from_bytes(whole.data(), whole.size(), name);
        int refused = 0, same = 0;
        for (std::size_t i = 0; i < whole.size(); ++i) {
            std::vector<std::uint8_t> bad = whole;
            bad[i] ^= 0xFF;
            try {
                const TorchCheckpointFile got = TorchCheckpointFile::from_bytes(bad.data(), bad.size(), name);
                bool equal = got.tensors().size() == want.tensors().size();
                for (const auto& [tensor, w] : want.tensors()) {
                    if (!equal || !got.has(tensor)) {
                        equal = false;
                        break;
                    }
                    const TensorView& g = got.get(tensor);
                    equal = g.dtype == w.dtype && g.shape == w.shape && g.bytes == w.bytes &&
                            (w.bytes == 0 || std::memcmp(g.data, w.data, w.bytes) == 0);
                }
                CAPTURE(i);
                CHECK(equal);
                ++same;
            } catch (const UserError&) {
                ++refused;
            }
        }
        MESSAGE(name << ": " << refused << " flips refused, " << same << " read the same tensors");
        CHECK(refused > static_cast<int>(whole.size()) / 3);   // (torch pads records to 64-byte alignment: flips there change nothing)
    }
}
