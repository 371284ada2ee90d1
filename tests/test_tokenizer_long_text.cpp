// text/sentencepiece_cuts.h: a long text encoded in parts against sentencepiece's Encode over the whole text
// (Tokenizer::encode_whole), on real text (the repository's docs, with and without line breaks) and on random strings
// cut every few bytes. BPE: the same ids (its merges compare piece scores, they sum none). Unigram: its Viterbi sums
// piece scores in float along the text, so the whole text and a part can break a tie (or a near-tie) by rounding
// differently: the parts' segmentation must decode to the text and score at least as high as the whole's under the
// model, within a part's own rounding, the sum taken in double (a cut inside a piece would cost the segmentation its
// best path). A text within one part is encoded as sentencepiece encodes it; a model whose normaliser is not the
// identity is never cut.
#include <sentencepiece_processor.h>
#include <sentencepiece_trainer.h>

#include <algorithm>
#include <cmath>
#include <random>

#include "test_util.h"
#include "text/tokenizer.h"

using namespace retro;
namespace fs = std::filesystem;

namespace {
// The repository's docs, sorted by name, at most `max_bytes`: real prose with Markdown, code, tables, numbers,
// runs of spaces, tabs and non-ASCII characters.
std::string docs_text(std::size_t max_bytes) {
    std::vector<fs::path> files;
    for (const auto& e : fs::directory_iterator(test::source_dir() / "docs"))
        if (e.path().extension() == ".md") files.push_back(e.path());
    std::sort(files.begin(), files.end());
    std::string text;
    for (const auto& f : files) {
        if (text.size() >= max_bytes) break;
        text += test::read_text(f);
    }
    return text.substr(0, std::min(max_bytes, text.size()));
}

std::string trained_model(const test::TempDir& tmp, const std::string& name, const std::string& options) {
    fs::create_directories(tmp / "corpus");
    test::write_text(tmp / "corpus" / "docs.txt", docs_text(300'000));
    auto r = test::run_tool("retro-tokenizer", "train " + (tmp / "corpus").string() + " --out " + (tmp / name).string() +
                                                   " --quiet " + options);
    REQUIRE_MESSAGE(r.exit_code == 0, r.err);
    return (tmp / name / "tok.model").string();
}

// A unigram segmentation's score under the model, summed in double: its pieces' scores, and a constant for each
// character of a byte-fallback run (a character no piece holds: unknown in every segmentation of the text alike).
class UnigramScore {
public:
    explicit UnigramScore(const std::string& model) { REQUIRE(sp_.Load(model).ok()); }
    double operator()(const std::vector<int>& ids) const {
        double s = 0;
        for (int id : ids) {
            if (!sp_.IsByte(id)) s += sp_.GetScore(id);
            else if ((std::stoul(sp_.IdToPiece(id).substr(3, 2), nullptr, 16) & 0xC0) != 0x80) s += -100.0;
        }
        return s;
    }

private:
    sentencepiece::SentencePieceProcessor sp_;
};

// Parts against the whole: the same ids (BPE), or (unigram, `score` given) ids that decode to the same text and score
// at least as high as the whole's. The texts may be long: no check prints them.
void check_parts(const Tokenizer& tok, const UnigramScore* score, const std::vector<int>& parts,
                 const std::vector<int>& whole) {
    if (!score) {
        const bool same_ids = parts == whole;
        CHECK(same_ids);
        return;
    }
    // decoded as the whole's ids decode (a '▁' in the text itself comes back as a space either way)
    const bool same_text = tok.decode(parts) == tok.decode(whole);
    CHECK(same_text);
    // a part's own float sums round too (a 100 KB part's offsets reach ~3e5, its steps ~0.03): a tolerance of 1e-7 of
    // the score (0.13 nats on the 700 KB text; a cut inside a piece costs nats), at least 1e-3
    const double whole_score = (*score)(whole);
    CHECK((*score)(parts) >= whole_score - std::max(1e-3, 1e-7 * std::abs(whole_score)));
}

// Random strings over an alphabet rich in the bytes cuts are made at (single and double spaces, line feeds, tabs)
// and the characters around them, each encoded in parts of 1 to 40 bytes against the whole.
void check_random_strings(const Tokenizer& tok, const UnigramScore* score, unsigned seed) {
    const std::vector<std::string> alphabet = {"a", "e", "th", "the", "ing", " ", " ", "  ", "\n", "\n\n", "\t", ".",
                                               ",", "é", "中", "☃", "0", "7", "#", "-", "`", "|", "ß", "\r", "▁"};
    std::mt19937 rng(seed);
    int cut_texts = 0;
    for (int n = 0; n < 400; ++n) {
        std::string text;
        const int pieces = 5 + static_cast<int>(rng() % 120);
        for (int i = 0; i < pieces; ++i) text += alphabet[rng() % alphabet.size()];
        const std::size_t part = 1 + rng() % 40;
        std::size_t longest = 0;
        const auto ids = tok.cuts().encode(
            text, part, [&](std::string_view p, std::vector<int>& out) { out = tok.encode_whole(p); }, &longest);
        cut_texts += longest < text.size();
        CAPTURE(text);
        CAPTURE(part);
        check_parts(tok, score, ids, tok.encode_whole(text));
        CHECK(tok.encode(text, part) == ids);
    }
    CHECK(cut_texts > 300);   // the cuts were made
}
}  // namespace

TEST_CASE("tokenizer long texts: unigram parts cut at single spaces and line feeds decode to the text and score as the whole") {
    test::TempDir tmp("toklong_cuts");
    const std::string model = trained_model(tmp, "uni", "--vocab-size 2000");
    Tokenizer tok(model);
    const UnigramScore score(model);
    REQUIRE_MESSAGE(tok.cuts().why_whole().empty(), tok.cuts().why_whole());
    const std::string text = docs_text(1'500'000);
    std::string one_line = text;
    std::replace(one_line.begin(), one_line.end(), '\n', ' ');
    const auto whole = tok.encode_whole(text), whole_line = tok.encode_whole(one_line);
    for (std::size_t part : {std::size_t{64}, std::size_t{4096}, std::size_t{100'000}}) {
        CAPTURE(part);
        std::size_t longest = 0;
        const auto ids = tok.cuts().encode(
            text, part, [&](std::string_view p, std::vector<int>& out) { out = tok.encode_whole(p); }, &longest);
        CHECK(longest < text.size());
        check_parts(tok, &score, ids, whole);
        check_parts(tok, &score, tok.encode(one_line, part), whole_line);
    }
    std::string big = text;   // over kEncodePartBytes: `encode --pieces` cuts as the ids do, at line feeds too
    while (big.size() <= 2 * kEncodePartBytes) big += "\n" + text;
    std::vector<std::string> pieces_of_ids;
    for (int id : tok.encode(big)) pieces_of_ids.push_back(tok.piece(id));
    const bool same_pieces = tok.encode_pieces(big) == pieces_of_ids;
    CHECK(same_pieces);
    const std::string within = text.substr(0, kEncodePartBytes);   // one part: sentencepiece's ids as they are
    const bool same_ids = tok.encode(within) == tok.encode_whole(within);
    CHECK(same_ids);
    check_random_strings(tok, &score, 11);
}

TEST_CASE("tokenizer long texts: BPE parts give the whole text's ids") {
    test::TempDir tmp("toklong_bpe");
    Tokenizer tok(trained_model(tmp, "bpe", "--vocab-size 1000 --model-type bpe"));
    REQUIRE_MESSAGE(tok.cuts().why_whole().empty(), tok.cuts().why_whole());
    const std::string text = docs_text(200'000);
    const bool same_ids = tok.encode(text, 512) == tok.encode_whole(text);
    CHECK(same_ids);
    check_random_strings(tok, nullptr, 12);
}

TEST_CASE("tokenizer long texts: identity models of spm_train - extra whitespace removed, with and without byte fallback") {
    // sentencepiece's defaults: remove_extra_whitespaces strips a text's trailing '▁' (a '▁' of its own too), so no
    // cut follows one; without byte fallback a run of unknown characters may be one piece, so cuts are at spaces only
    test::TempDir tmp("toklong_spm");
    fs::create_directories(tmp / "c");
    test::write_text(tmp / "c" / "docs.txt", docs_text(200'000));
    for (const std::string fallback : {"true", "false"}) {
        CAPTURE(fallback);
        const std::string prefix = (tmp / ("identity_" + fallback)).string();
        auto status = sentencepiece::SentencePieceTrainer::Train(
            "--input=" + (tmp / "c" / "docs.txt").string() + " --model_prefix=" + prefix +
            " --vocab_size=600 --normalization_rule_name=identity --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3"
            " --byte_fallback=" + fallback + " --minloglevel=2");
        REQUIRE(status.ok());
        Tokenizer tok(prefix + ".model");
        REQUIRE_MESSAGE(tok.cuts().why_whole().empty(), tok.cuts().why_whole());
        const UnigramScore score(prefix + ".model");
        check_random_strings(tok, &score, 13);
        const std::string text = docs_text(100'000);
        check_parts(tok, &score, tok.encode(text, 256), tok.encode_whole(text));
    }
}

TEST_CASE("tokenizer long texts: a model that normalises is encoded whole and says why") {
    // sentencepiece's default nmt_nfkc normaliser folds characters (and collapses spaces): no cut is known exact
    test::TempDir tmp("toklong_nfkc");
    fs::create_directories(tmp / "c");
    test::write_text(tmp / "c" / "docs.txt", docs_text(200'000));
    const std::string prefix = (tmp / "nfkc").string();
    auto status = sentencepiece::SentencePieceTrainer::Train(
        "--input=" + (tmp / "c" / "docs.txt").string() + " --model_prefix=" + prefix +
        " --vocab_size=500 --pad_id=0 --unk_id=1 --bos_id=2 --eos_id=3 --byte_fallback=true --minloglevel=2");
    REQUIRE(status.ok());
    Tokenizer tok(prefix + ".model");
    CHECK(tok.cuts().why_whole().find("character map") != std::string::npos);
    const std::string text = docs_text(20'000);
    std::size_t longest = 0;
    const auto ids = tok.cuts().encode(
        text, 64, [&](std::string_view p, std::vector<int>& out) { out = tok.encode_whole(p); }, &longest);
    CHECK(longest == text.size());
    const bool same_ids = ids == tok.encode_whole(text);
    CHECK(same_ids);
}
