#include "train/data.h"

#include <algorithm>
#include <filesystem>

#include "core/error.h"
#include "core/log.h"
#include "core/manifest.h"
#include "core/output_folder.h"
#include "core/splitmix.h"

namespace fs = std::filesystem;

namespace retro {


RetroData::RetroData(const std::string& db_dir, const std::string& knn_dir, const RetroConfig& c, double val_fraction,
                     Verify verify)
    : vocab_(c.num_tokens), pad_(c.pad_id), align_(neighbour_alignment_from_string(c.neighbour_alignment)),
      min_match_(static_cast<int>(c.neighbour_min_match)), val_fraction_(val_fraction) {
    db_ = std::make_unique<ChunkDb>(db_dir);
    if (verify != Verify::kNone)
        db_->verify(verify == Verify::kWhole ? ChunkDb::Verify::kRows : ChunkDb::Verify::kLayout);
    // batches read doc_ids, doc_offsets and seq_starts unchecked: one pass over them here (8 bytes a chunk, the
    // loop over the sequences below reads seq_starts anyway)
    db_->check_arrays();
    cs_ = db_->chunk_size();
    const auto& params = db_->manifest().value("parameters", nlohmann::json::object());
    if (!params.contains("seq_len") || !params.at("seq_len").is_number_integer())
        user_error_in((fs::path(db_dir) / "manifest.json").string(), "has no integer parameters.seq_len",
                      "rebuild the database with retro-chunk");
    seq_len_ = params.at("seq_len").get<std::int64_t>();
    if (cs_ != c.chunk_size)
        user_error_in(db_dir, cat("chunk size ", cs_, " differs from the model config's chunk_size ", c.chunk_size),
                      "use a config with the database's chunk size or rebuild the database");
    if (seq_len_ > c.max_seq_len)
        user_error_in(db_dir, cat("sequence length ", seq_len_, " exceeds the model config's max_seq_len ", c.max_seq_len),
                      cat("rebuild the database with retro-chunk --seq-len ", c.max_seq_len,
                          " (or less, a multiple of the chunk size), or use a config with a max_seq_len of ", seq_len_));
    if (seq_len_ % cs_ != 0) user_error_in(db_dir, cat("seq_len ", seq_len_, " is not a multiple of the chunk size"));
    // the database pads its documents with its tokenizer's pad id: a config with another pad_id would learn those pads
    // as text and mask a real token instead
    if (params.contains("special_ids") && params.at("special_ids").is_object() && params.at("special_ids").contains("pad") &&
        params.at("special_ids").at("pad").is_number_integer() &&
        params.at("special_ids").at("pad").get<std::int64_t>() != c.pad_id)
        user_error_in(db_dir, cat("pads with id ", params.at("special_ids").at("pad").get<std::int64_t>(),
                                  "; the model config's pad_id is ", c.pad_id),
                      cat("set \"pad_id\": ", params.at("special_ids").at("pad").get<std::int64_t>(), " in the config"));
    k_ = c.num_neighbours;
    if (!knn_dir.empty()) {
        const std::string path = (fs::path(knn_dir) / "neighbours.npy").string();
        // an interrupted retro-knn's folder (no manifest; its state.json, or no neighbours.npy): manifest_read says so
        // and how to finish. Its neighbours.npy may already be there (a run stopped between writing it and its
        // manifest), and was taken, the run's record naming no neighbours (a helper's kill soak, session 68); a
        // neighbours.npy made by hand (no state.json, no manifest) is still taken
        if (!fs::exists(fs::path(knn_dir) / "manifest.json") &&
            (!fs::exists(path) || !folder_owner(knn_dir).tool.empty()))
            manifest_read(knn_dir);
        // another tool's folder given as --knn (a database: "db/neighbours.npy: cannot open")
        if (const FolderOwner owner = folder_owner(knn_dir); !fs::exists(path) && !owner.tool.empty() && owner.tool != "retro-knn")
            user_error_in("--knn", cat(knn_dir, " holds ", owner.tool, "'s output, not retro-knn's neighbours"),
                          "give the folder retro-knn --out wrote");
        knn_ = NpyArray(path);
        if (knn_.shape().size() != 2 || knn_.dim(0) != db_->chunk_count())
            user_error_in(path, cat("has shape ", shape_string(knn_.shape()), "; the database has ",
                                    db_->chunk_count(), " chunks"),
                          "compute the neighbours for this database with retro-knn");
        if (knn_.dim(1) < k_)
            user_error_in(path, cat("holds ", knn_.dim(1), " neighbours per chunk; the config asks for ", k_));
        if (knn_.dtype() != DType::I64)   // (RETRO-pytorch's knn memmap is int32: docs/retro-pytorch.md)
            user_error_in(path, "has dtype " + dtype_name(knn_.dtype()) + ", expected i64 (chunk ids, -1 for none)",
                          "save it as int64: np.save(path, knn.astype(np.int64))");
        knn_.data<std::int64_t>();
        // a knn/ folder made by retro-knn names the database it was made for: its fingerprint must match
        if (fs::exists(fs::path(knn_dir) / "manifest.json") && fs::exists(fs::path(db_dir) / "manifest.json")) {
            const auto km = manifest_read(knn_dir);
            const std::string fp = folder_fingerprint(db_->manifest());
            for (const auto& in : km.value("inputs", nlohmann::json::array()))
                if (in.value("tool", "") == "retro-chunk" && in.contains("fingerprint") &&
                    in.at("fingerprint").get<std::string>() != fp)
                    user_error_in((fs::path(knn_dir) / "manifest.json").string(),
                                  "was computed for another chunk database (fingerprint differs from " + db_dir + ")",
                                  "run retro-knn again on this database");
            if (verify == Verify::kWhole) manifest_verify_outputs(knn_dir, {"neighbours.npy"});
            // neighbours mostly -1 read as padding: CCA learns nothing from them (retro-knn said why when it ran)
            if (const double padded = km.value("padded_fraction", 0.0); padded > 0.5)
                log_warn(cat(knn_dir, ": ", static_cast<int>(padded * 100 + 0.5), "% of its neighbour slots are empty (-1, ",
                             "read as padding): retrieval has little to read; see retro-knn's note on why"));
        }
        has_knn_ = true;
    }
    for (std::int64_t s = 0; s < db_->seq_count(); s++)
        (doc_is_val(db_->doc_of(db_->seq_start(s))) ? val_ : train_).push_back(s);
    if (train_.empty()) user_error_in(db_dir, "has no training sequences", "lower --val-fraction or add documents");
}

void RetroData::keep_train_docs(double fraction) {
    if (fraction >= 1) return;
    std::vector<std::int64_t> kept;
    for (auto s : train_) {
        const std::uint64_t doc = static_cast<std::uint64_t>(db_->doc_of(db_->seq_start(s)));
        if (splitmix_unit(doc ^ 0x7472616e646f6373ULL) < fraction) kept.push_back(s);
    }
    if (kept.empty()) user_error_in("--train-docs-fraction", cat(fraction, " keeps no training sequence"), "raise it");
    train_ = std::move(kept);
}

bool RetroData::doc_is_val(std::int64_t doc) const {
    if (val_fraction_ <= 0) return false;
    return splitmix_unit(static_cast<std::uint64_t>(doc)) < val_fraction_;
}

void RetroData::make_batch(const std::vector<std::int64_t>& seqs, bool with_retrieval, RetroBatch& out) const {
    const std::int64_t B = static_cast<std::int64_t>(seqs.size()), n = seq_len_, cs = cs_, l = n / cs, r = 2 * cs;
    out.B = B;
    out.n = n;
    out.k = k_;
    out.r = r;
    out.seq.assign(static_cast<std::size_t>(B * (n + 1)), pad_);
    out.retrieved.clear();
    const bool retrieval = with_retrieval && has_knn_;
    if (retrieval) out.retrieved.assign(static_cast<std::size_t>(B * l * k_ * r), pad_);
    for (std::int64_t b = 0; b < B; b++) {
        const std::int64_t c0 = db_->seq_start(seqs[b]);
        const std::int64_t doc = db_->doc_of(c0), end = db_->doc_end(doc);
        for (std::int64_t i = 0; i <= n; i++) {
            const std::int64_t row = c0 + i / cs;
            if (row >= end) continue;
            const std::int32_t t = db_->token(row, static_cast<int>(i % cs));
            if (t < 0 || t >= vocab_) refuse_token(row, t);
            out.seq[b * (n + 1) + i] = t;
        }
        if (!retrieval) continue;
        for (std::int64_t u = 0; u < l; u++) {
            const std::int64_t row = c0 + u;
            read_neighbours(row, end, source_.empty() || row >= end ? row : source_[row],
                            out.retrieved.data() + (b * l + u) * k_ * r);
        }
    }
}

void RetroData::neighbour_ids(std::int64_t row, std::int64_t doc_end, std::int64_t source, std::int64_t* ids) const {
    if (!has_knn_) {
        std::fill(ids, ids + k_, std::int64_t{-1});
        return;
    }
    const std::int64_t N = db_->chunk_count();
    const std::int64_t* knn = knn_.data<std::int64_t>();
    const std::int64_t kk = knn_.dim(1);
    for (std::int64_t j = 0; j < k_; j++) {
        std::int64_t id = row < doc_end ? knn[source * kk + j] : -1;
        if (id >= N || id < -1)
            user_error_in(knn_.path(), cat("row ", source, " names chunk ", id, " outside [0, ", N, ")"));
        if (id >= 0 && doc_is_val(db_->doc_of(id))) id = -1;
        ids[j] = id;
    }
}

void RetroData::read_neighbours(std::int64_t row, std::int64_t doc_end, std::int64_t source, std::int32_t* out) const {
    const std::int64_t r = 2 * cs_;
    std::fill(out, out + k_ * r, pad_);
    std::vector<std::int64_t> ids(static_cast<std::size_t>(k_));
    neighbour_ids(row, doc_end, source, ids.data());
    std::vector<std::int32_t> query;
    if ((align_ != NeighbourAlignment::chunk || min_match_ > 0) && row < doc_end) db_->rows(row, row + 1, query);
    for (std::int64_t j = 0; j < k_; j++) {
        if (ids[j] < 0) continue;
        neighbour_read(*db_, align_, min_match_, query.data(), ids[j], pad_, out + j * r);
        for (std::int64_t i = 0; i < r; i++)
            if (out[j * r + i] < 0 || out[j * r + i] >= vocab_) refuse_neighbour_tokens(ids[j], out[j * r + i]);
    }
}

void RetroData::refuse_token(std::int64_t row, std::int32_t id) const {
    user_error_in((fs::path(db_->dir()) / "chunks.npy").string(),
                  cat("row ", row, " holds token id ", id, ", outside the model config's vocabulary [0, ", vocab_, ")"),
                  "rebuild the database with retro-chunk");
}

void RetroData::refuse_neighbour_tokens(std::int64_t id, std::int32_t bad) const {
    // a window reads chunk id and its neighbours in the document (data/neighbour_window.h: id - 1 to id + 1)
    for (std::int64_t row = std::max<std::int64_t>(0, id - 1); row <= std::min(db_->chunk_count() - 1, id + 1); row++)
        for (int c = 0; c < cs_; c++)
            if (const std::int32_t t = db_->token(row, c); t < 0 || t >= vocab_) refuse_token(row, t);
    refuse_token(id, bad);   // (not reached: the window's tokens are those rows')
}

void RetroData::plant_oracle_neighbours(const std::vector<std::int64_t>& seqs, const std::vector<std::int64_t>& epochs,
                                        std::uint64_t seed, double p, bool splice, bool hindsight,
                                        RetroBatch& out) const {
    if (p <= 0 || out.retrieved.empty()) return;
    const std::int64_t l = seq_len_ / cs_, r = 2 * cs_;
    if (epochs.size() != seqs.size()) throw InternalError("plant_oracle_neighbours: one epoch per sequence expected");
    if (splice && hindsight) throw InternalError("plant_oracle_neighbours: splice and hindsight together");
    std::vector<std::int32_t> retrieved(static_cast<std::size_t>(r)), next_chunk;
    std::vector<std::int64_t> next_ids(static_cast<std::size_t>(k_));
    for (std::size_t b = 0; b < seqs.size(); b++) {
        const std::int64_t c0 = db_->seq_start(seqs[b]), end = db_->doc_end(db_->doc_of(c0));
        for (std::int64_t u = 0; u < l && c0 + u < end; u++) {
            const OraclePick pick = oracle_pick(seed, epochs[b], seqs[b], u, p, k_, cs_);
            if (pick.slot < 0) continue;
            std::int32_t* unit = out.retrieved.data() + ((static_cast<std::int64_t>(b) * l + u) * k_ + pick.slot) * r;
            if (hindsight) {
                const std::int64_t next = c0 + u + 1;
                if (next >= end) continue;
                neighbour_ids(next, end, next, next_ids.data());
                const std::int64_t n = next_ids[static_cast<std::size_t>(pick.slot)];
                if (n < 0) continue;
                // as the model reads real neighbours: chunk-aligned (n - 1 and n), or under match alignment shifted so
                // that n's match with chunk u + 1 sits at its positions (neighbour_match's window, started cs earlier)
                // (a neighbour that neighbour_min_match would not let chunk u + 1 read keeps the slot as retrieved)
                std::int64_t offset = 0;
                if (align_ == NeighbourAlignment::match || min_match_ > 0) {
                    next_chunk.clear();   // rows() appends
                    db_->rows(next, next + 1, next_chunk);
                    const NeighbourMatch m = neighbour_match(*db_, next_chunk.data(), n, pad_);
                    if (m.run < min_match_) continue;
                    if (align_ == NeighbourAlignment::match) offset = m.offset;
                }
                neighbour_window(*db_, n, offset - cs_, pad_, unit);
                continue;
            }
            std::copy(unit, unit + r, retrieved.begin());
            // the chunk-aligned window: neighbour_read's match search could shift it where the text repeats (a
            // chunk equal to the one before it matches there first), and its min-match filter has nothing to filter
            neighbour_window(*db_, c0 + u, 0, pad_, unit);
            if (splice) std::copy(retrieved.begin() + cs_ + pick.cut, retrieved.end(), unit + cs_ + pick.cut);
        }
    }
}

void RetroData::set_neighbour_source(std::vector<std::int64_t> source) {
    if (!source.empty() && static_cast<std::int64_t>(source.size()) != db_->chunk_count())
        throw InternalError("set_neighbour_source: one source row per chunk expected");
    source_ = std::move(source);
}

bool retrieval_dropped(std::uint64_t seed, std::int64_t epoch, std::int64_t seq, double p) {
    const std::uint64_t epoch_key = splitmix64(splitmix64(seed ^ 0x5265747244726f70ULL) + static_cast<std::uint64_t>(epoch));
    return splitmix_unit(epoch_key + static_cast<std::uint64_t>(seq)) < p;
}

OraclePick oracle_pick(std::uint64_t seed, std::int64_t epoch, std::int64_t seq, std::int64_t u, double p,
                       std::int64_t k, std::int64_t cs) {
    const std::uint64_t epoch_key = splitmix64(splitmix64(seed ^ 0x4f7261636c654e62ULL) + static_cast<std::uint64_t>(epoch));
    const std::uint64_t h = splitmix64(splitmix64(epoch_key + static_cast<std::uint64_t>(seq)) + static_cast<std::uint64_t>(u));
    OraclePick pick;
    if (splitmix_unit(h) >= p) return pick;
    pick.slot = static_cast<int>(splitmix64(h) % static_cast<std::uint64_t>(k));
    pick.cut = static_cast<int>(splitmix64(splitmix64(h)) % static_cast<std::uint64_t>(cs + 1));
    return pick;
}

double oracle_share(double p, std::int64_t until, std::int64_t step) {
    if (until <= 0) return p;
    const double left = 1.0 - static_cast<double>(step - 1) / static_cast<double>(until);
    return left > 0 ? p * left : 0.0;
}

void mask_dropped_neighbours(RetroBatch& batch, const std::vector<bool>& drop, std::int32_t pad) {
    if (batch.retrieved.empty()) return;
    const std::size_t per_seq = batch.retrieved.size() / static_cast<std::size_t>(batch.B);
    for (std::size_t b = 0; b < drop.size() && b < static_cast<std::size_t>(batch.B); b++)
        if (drop[b]) std::fill_n(batch.retrieved.begin() + static_cast<std::ptrdiff_t>(b * per_seq), per_seq, pad);
}

}  // namespace retro
