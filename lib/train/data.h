// Training batches from a chunk database (lib/data ChunkDb, docs/formats.md "retro-chunk") and its
// neighbours (knn/neighbours.npy, (chunks, k) i64, -1 = none), as RETRO-pytorch's RETRODataset builds them
// (RETRO.md A.6) with RetroKit's layout (ARCHITECTURE.md Decisions 3, 4):
//   seq s starting at row c0 of document d: token i (0..n) = row c0 + i/cs, column i%cs while the row is in d,
//   else pad 0 (so labels past the document are ignored);
//   chunk u's neighbours = knn[c0 + u, :k]; neighbour j gives row j (cs ids) + continuation row j+1 when it
//   is in j's document and does not begin with its EOS (RP's rule, ChunkDb::neighbour_tokens), else cs pads; a
//   -1 neighbour (or a row past the document) gives 2cs pads (masked).
//   With the config's "neighbour_alignment": "match" each neighbour's window is shifted to its match with
//   chunk u (data/neighbour_window.h).
// Validation split by documents (a fixed hash of the document index); neighbours that fall in validation
// documents are replaced by -1 for every sequence, so validation text is never retrieved.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "core/npy.h"
#include "data/chunk_db.h"
#include "data/neighbour_window.h"
#include "model/config.h"
#include "model/retro.h"

namespace retro {

class RetroData {
public:
    // What to re-hash against the manifests first (core/manifest.h manifest_verify_outputs): nothing, the
    // database's layout arrays (what check_arrays reads whole: a reader of a few sequences, eval), or also its
    // chunks and neighbours.npy (training, which reads rows all over both).
    enum class Verify { kNone, kLayout, kWhole };
    // `knn_dir` empty: no neighbours (batches without retrieval).
    RetroData(const std::string& db_dir, const std::string& knn_dir, const RetroConfig& config, double val_fraction,
              Verify verify = Verify::kNone);

    std::int64_t seq_len() const { return seq_len_; }
    const std::vector<std::int64_t>& train_seqs() const { return train_; }
    const std::vector<std::int64_t>& val_seqs() const { return val_; }
    bool doc_is_val(std::int64_t doc) const;
    const ChunkDb& db() const { return *db_; }

    // Fills `out` for the given sequence indices; with_retrieval = false leaves out.retrieved empty.
    void make_batch(const std::vector<std::int64_t>& seqs, bool with_retrieval, RetroBatch& out) const;

    bool has_neighbours() const { return has_knn_; }
    std::int32_t pad_id() const { return pad_; }
    std::int64_t neighbours_per_chunk() const { return k_; }
    // The k neighbour ids a batch gives chunk `row` of document `doc` (-1: none, past the document's end,
    // or in a validation document), read from the knn row `source` (= row, or another row for the
    // shuffled-neighbours control of `retro-train eval`).
    void neighbour_ids(std::int64_t row, std::int64_t doc_end, std::int64_t source, std::int64_t* ids) const;
    // What the encoder reads for chunk `row`: k units of 2cs ids (pads for a missing neighbour), the
    // neighbours named by knn row `source` (as neighbour_ids), each aligned to chunk `row`'s tokens.
    void read_neighbours(std::int64_t row, std::int64_t doc_end, std::int64_t source, std::int32_t* out) const;
    // The shuffled-neighbours control: chunk c reads the neighbours of chunk source[c] (empty: its own).
    void set_neighbour_source(std::vector<std::int64_t> source);
    // Train on the share `fraction` of the non-validation documents (a fixed hash of the document index, independent
    // of the validation split's); the others stay in the database as neighbours the model never trains on.
    void keep_train_docs(double fraction);
    // --oracle-neighbours: in the training batch `out` made from `seqs` (epochs[b]: the epoch sequence b was drawn
    // in), each chunk that oracle_pick picks reads, in that slot, its own text and continuation (the chunk-aligned
    // window, where a perfect match sits under any alignment): what a perfect retriever would find, so CCA learns to copy
    // from a neighbour that holds the next chunk (docs/retrieval.md section 11). With `splice`, the oracle's
    // continuation holds the next chunk only up to the pick's cut and the slot's retrieved tokens from there on,
    // as a real neighbour whose match ends: copying pays only while the neighbour agrees with the text so far.
    // With `hindsight` (--oracle-hindsight; not with splice) the slot reads instead a real neighbour found with the
    // next chunk: the slot's neighbour n of chunk u + 1 (the knn row of u + 1, validation documents masked as
    // always), read from one chunk before n (under match alignment shifted so that n's match with chunk u + 1
    // sits at the continuation's positions) — what a retriever that had seen the next chunk would return: real
    // text of another document that holds the next chunk as often, and as partly, as the corpus repeats it.
    // Where chunk u + 1 is past the document or has no such neighbour the slot keeps its retrieved one.
    // Evaluation never calls this.
    void plant_oracle_neighbours(const std::vector<std::int64_t>& seqs, const std::vector<std::int64_t>& epochs,
                                 std::uint64_t seed, double p, bool splice, bool hindsight, RetroBatch& out) const;

private:
    // Throws naming chunks.npy and `row` (which holds `id`, outside the config's vocabulary): an edited database read
    // with --no-verify, named as retro-chunk inspect names it (the model's own check could only say "batch").
    [[noreturn]] void refuse_token(std::int64_t row, std::int32_t id) const;
    // Rows around neighbour `id` (the ones a neighbour window reads), the first whose tokens leave the vocabulary.
    [[noreturn]] void refuse_neighbour_tokens(std::int64_t id, std::int32_t bad) const;

    std::unique_ptr<ChunkDb> db_;
    NpyArray knn_;
    bool has_knn_ = false;
    std::int64_t seq_len_ = 0, cs_ = 0, k_ = 0;
    std::int64_t vocab_ = 0;   // the config's num_tokens: ids at or past it have no embedding
    std::int32_t pad_ = 0;
    NeighbourAlignment align_ = NeighbourAlignment::chunk;
    int min_match_ = 0;
    double val_fraction_ = 0;
    std::vector<std::int64_t> train_, val_;
    std::vector<std::int64_t> source_;   // set_neighbour_source
};

// --retrieval-dropout: whether sequence `seq`, drawn in `epoch` of a run seeded `seed`, reads no neighbours (a
// fixed hash: the same on every rank, for any --grad-accum, and after --resume).
bool retrieval_dropped(std::uint64_t seed, std::int64_t epoch, std::int64_t seq, double p);
// --oracle-neighbours: the slot (0..k-1) in which chunk u of sequence `seq`, drawn in `epoch` of a run seeded
// `seed`, reads itself instead of a retrieved neighbour (slot -1: it does not), and with --oracle-splice the cut
// (0..cs): how many tokens of the continuation are the next chunk's. A fixed hash picks a share p of the chunks,
// the slot and the cut: the same on every rank, for any --grad-accum, and after --resume.
struct OraclePick {
    int slot = -1;
    int cut = 0;
};
OraclePick oracle_pick(std::uint64_t seed, std::int64_t epoch, std::int64_t seq, std::int64_t u, double p,
                       std::int64_t k, std::int64_t cs);
// --oracle-until: the oracle share at optimizer step `step` (1-based): p while until is 0; else falling linearly from
// p at step 1 to 0 after step `until` (p x (1 - (step - 1) / until)), 0 from then on. The draw keeps oracle_pick's
// hash, so the chunks picked at a lower share are a subset of those picked at a higher one.
double oracle_share(double p, std::int64_t until, std::int64_t step);
// Every retrieved token of the sequences b with drop[b] becomes pad: all their neighbours are masked.
void mask_dropped_neighbours(RetroBatch& batch, const std::vector<bool>& drop, std::int32_t pad);

}  // namespace retro
