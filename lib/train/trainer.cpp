// retro-train (train/trainer.h): setup, the step loop, validation, metrics and the final files of a run;
// the backend's step is in trainer_device.cpp, checkpoints in trainer_checkpoint.cpp (train/trainer_impl.h).
#include "train/trainer_impl.h"

namespace fs = std::filesystem;

namespace retro {

std::vector<std::int64_t> train_epoch_order(const std::vector<std::int64_t>& seqs, std::uint64_t seed, std::int64_t epoch) {
    std::vector<std::int64_t> v = seqs;
    std::mt19937_64 rng(seed * 0x9e3779b97f4a7c15ULL + static_cast<std::uint64_t>(epoch) + 1);
    for (std::size_t i = v.size(); i > 1; i--) std::swap(v[i - 1], v[rng() % i]);   // Fisher-Yates
    return v;
}

float train_clip_scale(double norm, double clip) {
    // torch.nn.utils.clip_grad_norm_: clip_coef = max_norm / (total_norm + 1e-6), applied where it is below 1
    if (!(clip > 0) || !(norm > clip)) return 1.0f;
    return static_cast<float>(clip / (norm + 1e-6));
}

double train_lr_at(const TrainOptions& o, std::int64_t step) {
    if (o.warmup > 0 && step < o.warmup) return o.lr * static_cast<double>(step + 1) / static_cast<double>(o.warmup);
    const double span = static_cast<double>(std::max<std::int64_t>(1, o.steps - o.warmup));
    const double t = std::min(1.0, static_cast<double>(step - o.warmup) / span);
    const double floor = o.lr * o.min_lr_ratio;
    return floor + 0.5 * (o.lr - floor) * (1.0 + std::cos(3.14159265358979323846 * t));
}

namespace train_impl {

// The step's loss from every rank's micro-batch losses (rank R holds a = R, R + N, ... at j = a / N), added in
// micro-batch order a, as one process adds them.
double Trainer::fold_step_loss(const std::vector<double>& losses) {
    const int N = dist_->size();
    const std::int64_t A = o_.grad_accum, m = A / N;
    const std::vector<double> all = dist_->allgather(losses);
    double loss = 0;
    for (std::int64_t a = 0; a < A; a++) loss += all[static_cast<std::size_t>((a % N) * m + a / N)];
    return loss;
}

// --train-only: the trainable flags, their canonical name, and the refusals of a choice that trains nothing.
void Trainer::setup_groups() {
    // every group (the copy group only where the config has a copy head, so older runs' records stay as they were)
    const std::string list = !o_.train_only.empty() ? o_.train_only
                             : model_->config().copy_head ? "cca,encoder,copy,decoder" : "cca,encoder,decoder";
    const auto groups = param_groups_parse(list, "--train-only");
    train_only_ = param_groups_string(groups);
    trainable_ = param_trainable(model_->layout(), groups);
    const auto& es = model_->layout().entries();
    bool used_without_retrieval = false;
    for (std::size_t t = 0; t < es.size(); t++)
        if (trainable_[t]) {
            trainable_count_ += es[t].numel;
            used_without_retrieval = used_without_retrieval || param_group(es[t].name) == ParamGroup::DECODER;
        }
    if (trainable_count_ == 0)
        user_error_in("--train-only", "\"" + o_.train_only + "\" selects no parameter of " + o_.config,
                      model_->config().dec_cross_attn_layers.empty()
                          ? "the config has no CCA layers: train `decoder` or use a config with dec_cross_attn_layers"
                          : "the config has no copy head: train `cca,encoder` or set \"copy_head\": true");
    if (o_.no_retrieval && !used_without_retrieval)
        user_error_in("--train-only", "\"" + train_only_ + "\" trains nothing with --no-retrieval (CCA and the encoder "
                      "are skipped without neighbours)", "give --knn, or add `decoder`");
    if (!o_.train_only.empty() && !used_without_retrieval && o_.init_from.empty() && !o_.resume)
        log_warn("--train-only " + train_only_ + " without --init-from trains over a decoder that stays as initialised "
                 "(random): retro-fitting starts from a trained base (--init-from RUN)");
    const std::int64_t total = model_->layout().total();
    start_lines_.push_back(cat("parameters: ", trainable_count_, " trainable (", train_only_, "), ", total - trainable_count_,
                               " frozen"));
}

// The provenance fields of the first metrics line of a retro-fitted or partly frozen run.
std::string Trainer::provenance_fields() const {
    nlohmann::json j = {{"train_only", train_only_}};
    if (!init_.weights.empty()) {
        j["init_from"] = init_.weights;
        j["init_from_fingerprint"] = init_.fingerprint;
    }
    std::string s = j.dump();
    return ", " + s.substr(1, s.size() - 2);
}

// A training micro-batch of the sequences next_seqs() drew: --oracle-neighbours planted, then --retrieval-dropout.
void Trainer::make_training_batch(const std::vector<std::int64_t>& seqs, RetroBatch& batch) const {
    data_->make_batch(seqs, !o_.no_retrieval, batch);
    data_->plant_oracle_neighbours(seqs, epochs_, o_.seed, oracle_share(o_.oracle_neighbours, o_.oracle_until, step_),
                                   o_.oracle_splice, o_.oracle_hindsight, batch);
    mask_dropped_neighbours(batch, drop_, data_->pad_id());
}

std::vector<std::int64_t> Trainer::next_seqs() {
    std::vector<std::int64_t> out;
    drop_.clear();
    epochs_.clear();
    const auto& train = data_->train_seqs();
    while (static_cast<std::int64_t>(out.size()) < o_.batch_size) {
        if (cursor_.pos >= static_cast<std::int64_t>(train.size())) {
            cursor_.epoch++;
            cursor_.pos = 0;
        }
        if (order_epoch_ != cursor_.epoch) {
            order_ = train_epoch_order(train, o_.seed, cursor_.epoch);
            order_epoch_ = cursor_.epoch;
        }
        const std::int64_t seq = order_[cursor_.pos++];
        out.push_back(seq);
        epochs_.push_back(cursor_.epoch);
        drop_.push_back(o_.retrieval_dropout > 0 &&
                        retrieval_dropped(o_.seed, cursor_.epoch, seq, o_.retrieval_dropout));
    }
    return out;
}

// Validation loss over the first val_batches batches of the held-out sequences. With N ranks batch v runs on
// rank v % N and the sums are folded in batch order, so the figure equals a 1-process run's.
double Trainer::validate() {
    const auto& val = data_->val_seqs();
    if (val.empty()) return std::nan("");
    const int N = dist_->size(), R = dist_->rank();
    // the batches the split holds, at most: --val-batches 1e8 sized two doubles per batch asked (3 GB, then "out of
    // memory" at the run's end); those past the split were empty and added nothing
    const auto held = static_cast<std::int64_t>(val.size());
    const std::int64_t batches = std::min(o_.val_batches, (held + o_.batch_size - 1) / o_.batch_size);
    const std::int64_t slots = (batches + N - 1) / N;
    std::vector<double> mine(static_cast<std::size_t>(2 * slots), 0.0);   // per local batch: loss sum, labels
    RetroBatch batch;
    for (std::int64_t v = R; v < batches; v += N) {
        std::vector<std::int64_t> seqs;
        for (std::int64_t i = 0; i < o_.batch_size; i++) {
            const std::int64_t j = v * o_.batch_size + i;
            if (j >= static_cast<std::int64_t>(val.size())) break;
            seqs.push_back(val[j]);
        }
        if (seqs.empty()) break;
        data_->make_batch(seqs, !o_.no_retrieval, batch);
        const double loss = dmodel_ ? dmodel_->forward(batch) : model_->forward(batch);
        const std::int64_t labels = dmodel_ ? dmodel_->label_count() : model_->label_count();
        mine[2 * (v / N)] = loss * static_cast<double>(labels);
        mine[2 * (v / N) + 1] = static_cast<double>(labels);
    }
    const std::vector<double> all = dist_->allgather(mine);
    double total = 0, labels = 0;
    for (std::int64_t v = 0; v < batches; v++) {
        const std::size_t at = static_cast<std::size_t>((v % N) * 2 * slots + 2 * (v / N));
        total += all[at];
        labels += all[at + 1];
    }
    return labels > 0 ? total / labels : std::nan("");
}

// One step's gradients: this rank's micro-batches (a = R, R + N, ...; every rank walks the data cursor over all
// of them) each from zeroed gradients, then summed in micro-batch order over all ranks (or by MPI's all-reduce
// with --reduce fast). Points `reduced` at the summed buffer; returns the step's loss (mean of the micro-batch
// losses, folded in order).
double Trainer::accumulate_step_gradients(std::vector<float>*& reduced) {
    const int N = dist_->size();
    const std::int64_t A = o_.grad_accum, m = A / N, P = model_->layout().total();
    const bool keep_parts = N > 1 && o_.reduce == "deterministic";
    std::vector<float>& grads = model_->grads();
    std::vector<double> losses(static_cast<std::size_t>(m));
    for_each_own_micro_batch([&](std::int64_t j, const RetroBatch& batch) {
        model_->zero_grad();
        losses[static_cast<std::size_t>(j)] = model_->forward(batch) / static_cast<double>(A);
        model_->backward(1.0f / static_cast<float>(A));
        if (keep_parts) {
            if (j + 1 < m) parts_[static_cast<std::size_t>(j)] = grads;   // the last part stays in grads
        } else if (m > 1) {
            if (j == 0) acc_ = grads;
            else
                for (std::int64_t i = 0; i < P; i++) acc_[i] += grads[i];
        }
    });
    // Across ranks only the trainable elements travel (a retro-fit freezes most of the model): they are packed
    // into one contiguous buffer in layout order, reduced, and unpacked; frozen elements are never read.
    const auto& ranges = opt_->ranges();
    const bool packed = N > 1 && !(ranges.size() == 1 && ranges[0].first == 0 && ranges[0].second == P);
    const std::int64_t T = packed ? opt_->trainable_count() : P;
    auto pack = [&](const float* src, std::vector<float>& dst) {
        dst.resize(static_cast<std::size_t>(T));
        std::int64_t at = 0;
        for (const auto& [b, e] : ranges) at = std::copy(src + b, src + e, dst.begin() + at) - dst.begin();
    };
    auto unpack = [&](const std::vector<float>& src, float* dst) {
        std::int64_t at = 0;
        for (const auto& [b, e] : ranges) {
            std::copy(src.begin() + at, src.begin() + at + (e - b), dst + b);
            at += e - b;
        }
    };
    if (keep_parts) {
        std::vector<const float*> local;
        for (std::int64_t j = 0; j + 1 < m; j++) local.push_back(parts_[j].data());
        local.push_back(grads.data());
        acc_.resize(static_cast<std::size_t>(P));
        if (packed) {
            std::vector<std::vector<float>> packed_parts(local.size());
            std::vector<const float*> packed_local;
            for (std::size_t j = 0; j < local.size(); j++) {
                pack(local[j], packed_parts[j]);
                packed_local.push_back(packed_parts[j].data());
            }
            std::vector<float> sum(static_cast<std::size_t>(T));
            dist_->ordered_sum(packed_local, sum.data(), T);
            unpack(sum, acc_.data());
        } else {
            dist_->ordered_sum(local, acc_.data(), P);
        }
        reduced = &acc_;
    } else {
        reduced = m > 1 ? &acc_ : &grads;
        if (packed) {
            std::vector<float> buf;
            pack(reduced->data(), buf);
            dist_->allreduce_sum(buf.data(), T);
            unpack(buf, reduced->data());
        } else {
            dist_->allreduce_sum(reduced->data(), P);
        }
    }
    return fold_step_loss(losses);
}

// Every rank must hold the same weights (the same reduced gradients and the same AdamW step); checked at each
// checkpoint by comparing the weights' xxh3 across ranks.
void Trainer::check_ranks_agree(std::int64_t step) {
    if (!dist_->active()) return;
    const auto& p = model_->params();
    const std::string fp = fingerprint_bytes(p.data(), p.size() * sizeof(float));
    const std::vector<std::uint64_t> all = dist_->allgather(std::vector<std::uint64_t>{std::stoull(fp, nullptr, 16)});
    for (std::size_t r = 1; r < all.size(); r++)
        if (all[r] != all[0])
            throw InternalError(cat("retro-train: rank ", r, "'s weights differ from rank 0's at step ", step,
                                    o_.reduce == "deterministic"
                                        ? " (the same options and inputs gave the ranks different weights: another CPU "
                                          "or library build on that rank's machine?)"
                                        : " (the all-reduce gave ranks different sums; use --reduce deterministic)"));
}

void Trainer::append_metrics(const std::string& line) {
    // a failed append (a full disk) stops the run naming metrics.jsonl; the checkpoints before it resume it
    append_to_file((fs::path(o_.out) / "metrics.jsonl").string(), line + "\n");
}

void Trainer::run() {
    if (o_.steps <= 0) user_error_in("--steps", "must be positive");
    if (o_.batch_size <= 0) user_error_in("--batch-size", "must be positive");
    if (o_.grad_accum <= 0) user_error_in("--grad-accum", "must be positive");
    // written as !(in range) so that NaN, which every comparison calls false, is refused too
    if (!(o_.lr > 0 && std::isfinite(o_.lr))) user_error_in("--lr", cat(o_.lr, " is not a positive number"));
    if (!(o_.weight_decay >= 0 && std::isfinite(o_.weight_decay)))
        user_error_in("--weight-decay", cat(o_.weight_decay, " is not a number >= 0"));
    if (!(o_.retrieval_lr_scale > 0 && std::isfinite(o_.retrieval_lr_scale)))
        user_error_in("--retrieval-lr-scale", cat(o_.retrieval_lr_scale, " is not a positive number"));
    // AdamW's decoupled decay scales each weight by 1 - lr x weight decay a step (adamw.cpp): at 1 or more it zeroes
    // or flips every weight, and the run diverged steps later with advice about --lr only
    if (const double top_lr = o_.lr * std::max(1.0, o_.retrieval_lr_scale); o_.weight_decay * top_lr >= 1)
        user_error_in("--weight-decay", cat(o_.weight_decay, " x the peak learning rate ", top_lr, " is ", o_.weight_decay * top_lr,
                                            ": AdamW scales the weights by 1 - lr x weight decay each step, which must stay above 0"),
                      "a weight decay well below 1 / lr (0.1 is usual)");
    if (!(o_.beta1 >= 0 && o_.beta1 < 1)) user_error_in("--beta1", cat(o_.beta1, " is outside [0, 1)"));
    if (!(o_.beta2 >= 0 && o_.beta2 < 1)) user_error_in("--beta2", cat(o_.beta2, " is outside [0, 1)"));
    if (!(o_.eps > 0 && std::isfinite(o_.eps))) user_error_in("--eps", cat(o_.eps, " is not a positive number"));
    if (!(o_.clip >= 0 && std::isfinite(o_.clip))) user_error_in("--clip", cat(o_.clip, " is not a norm"), "give 0 for no clipping");
    if (!(o_.min_lr_ratio >= 0 && o_.min_lr_ratio <= 1))
        user_error_in("--min-lr-ratio", cat(o_.min_lr_ratio, " is outside [0, 1]"));
    if (o_.warmup < 0) user_error_in("--warmup", cat(o_.warmup, " is not a number of steps"));
    if (o_.val_every < 0) user_error_in("--val-every", cat(o_.val_every, " is not a number of steps"), "give 0 to validate at the end only");
    if (o_.val_batches < 0) user_error_in("--val-batches", cat(o_.val_batches, " is not a number of batches"));
    if (o_.val_batches == 0 && o_.val_fraction > 0)
        log_info("--val-batches 0: no validation (metrics.jsonl will hold no val_loss)");
    if (o_.checkpoint_every < 0)
        user_error_in("--checkpoint-every", cat(o_.checkpoint_every, " is not a number of steps"), "give 0 to save at the end only");
    if (o_.keep_checkpoints < 0)
        user_error_in("--keep-checkpoints", cat(o_.keep_checkpoints, " is not a number of checkpoints"), "give 0 to keep them all");
    if (!(o_.val_fraction >= 0 && o_.val_fraction < 1)) user_error_in("--val-fraction", "must be in [0, 1)");   // (NaN too)
    if (o_.resume && o_.force)
        user_error_in("--resume and --force", "contradict each other: --force starts over, --resume continues",
                      "drop one of them");
    if (!o_.neighbours.empty() && o_.neighbours.find_first_not_of("0123456789") == std::string::npos &&
        !fs::exists(o_.neighbours))   // retro-knn's --neighbours is k; here it is the old name of --knn (a folder)
        user_error_in("--knn", "'" + o_.neighbours + "' is a number, not a neighbours folder (the count is retro-knn's --neighbours)",
                      "give the folder retro-knn --out wrote");
    if (o_.reduce != "fast" && o_.reduce != "deterministic" && o_.reduce != "nccl")
        user_error_in("--reduce", "'" + o_.reduce + "' is not fast, deterministic or nccl");
    if (o_.reduce == "nccl" && o_.device != "cuda")
        user_error_in("--reduce", "nccl reduces GPU gradients", "add --device cuda, or use fast or deterministic");
    // an input folder that is not there, named by its option ("nosuch: no such folder" named neither)
    for (const auto& [option, dir] : {std::pair<const char*, const std::string&>{"--db", o_.db}, {"--knn", o_.neighbours}})
        if (std::error_code ec; !dir.empty() && !(option == std::string("--knn") && o_.no_retrieval) && !fs::exists(dir, ec))
            user_error_in(option, dir + ": no such folder");
    // the run records the config's fingerprint, and --resume reads it again: a pipe (`--config <(...)`, /dev/stdin) is
    // read once, and the manifest failed on it after every step had trained (a helper's odd-paths campaign, session 57)
    if (std::error_code ec; fs::exists(o_.config, ec) && !fs::is_directory(o_.config, ec) && !fs::is_regular_file(o_.config, ec))
        user_error_in("--config", o_.config + " is not a regular file (a pipe or a device): the run records the config's "
                                               "fingerprint, and --resume reads it again",
                      "save the config to a file and give its path");
    const std::vector<OutputInput> inputs = {{"--db", o_.db}, {"--knn", o_.neighbours}, {"--init-from", o_.init_from}};
    // before the data and the model are read and sized: an --out that is not this tool's to write (an input, another
    // tool's, inside a folder a tool keeps for itself), then one that holds a run. Without the lock: rank 0 takes it
    // below, once the ranks are known (the same checks again there cost a few stat calls)
    output_folder_guard(o_.out, ctx_.tool, inputs, false, false);
    // a folder no tool claims that holds a model of someone else's (a downloaded model's config.json and
    // model.safetensors): refused with or without --force, which replaced them (run_folder.h)
    refuse_unclaimed_model_files(o_.out, o_.config);
    if (holds_run(o_.out, false) && !o_.resume && !o_.force)
        user_error_in(o_.out, "already holds a run", "pass --resume to continue it or --force to start over");
    dist_ = &distributed("retro-train");
    const int N = dist_->size();
    if (dist_->active())   // (first: a rank of other options hung in a later collective; one process hashes nothing)
        ranks_run_same_job(*dist_, train_rank_job(o_));
    if (o_.grad_accum % N != 0)
        user_error_in("--grad-accum", cat(o_.grad_accum, " micro-batches do not split over ", N, " ranks"),
                      cat("give a multiple of ", N, ": the global batch is --batch-size x --grad-accum whatever the "
                          "rank count, each rank runs --grad-accum / ranks of its micro-batches"));
    if (dist_->active()) {
        log_info(cat("data-parallel: rank ", dist_->rank(), " of ", N, " (", dist_->source(), "), ", o_.grad_accum / N,
                     " micro-batches of ", o_.batch_size, " per rank per step, ", thread_count(),
                     " threads per rank, --reduce ", o_.reduce));
        if (o_.reduce == "deterministic" && o_.grad_accum / N > 1)
            parts_.assign(static_cast<std::size_t>(o_.grad_accum / N - 1), {});
    }
    if (o_.device == "cuda") {   // the GPU before the data and the model: a machine without one is told first
        // one GPU per rank: before the first CUDA call (cuda_require's count), this rank's GPU becomes its "device 0"
        if (dist_->active()) cuda_select_local_device(dist_->local_rank(), dist_->local_size());
        cuda_require("--device", "retro-train",
                     dist_->active() ? cat("one GPU per rank: rank ", dist_->rank(), " has none (",
                                           dist_->local_size(), " ranks on this machine); launch no more ranks per "
                                           "machine than it has GPUs")
                                     : std::string("run where a GPU is, or train on the CPU (--device cpu, fp32)"));
    }
    config_ = RetroConfig::load(o_.config);
    // under mpirun the ranks of one machine map the same files: its first rank alone re-hashes them (a refusal ends
    // the job). One per machine, not rank 0 alone: a node-local copy of the database (scratch disks) is each
    // node's own, and a stale or partial copy on one node would otherwise feed it other tokens without a word.
    const bool verify = ctx_.verify_inputs && dist_->local_rank() == 0;
    data_ = std::make_unique<RetroData>(o_.db, o_.no_retrieval ? "" : o_.neighbours, config_, o_.val_fraction,
                                        verify ? RetroData::Verify::kWhole : RetroData::Verify::kNone);
    data_->keep_train_docs(o_.train_docs_fraction);
    if (data_->val_seqs().empty() && o_.val_fraction > 0 && o_.val_batches > 0)   // (few documents: none drawn)
        log_warn(cat(o_.db, ": --val-fraction ", o_.val_fraction, " holds out none of its ", data_->db().doc_count(),
                     " documents: no validation (metrics.jsonl will hold no val_loss, and retro-train eval has no val ",
                     "split); a larger --val-fraction holds some out"));
    {   // the database's token ids must be the model's: refused here, not at the first batch after --out is written
        const std::int64_t vocab =
            data_->db().manifest().value("parameters", nlohmann::json::object()).value("vocab_size", std::int64_t(0));
        if (vocab > config_.num_tokens)
            user_error_in(o_.config, cat("\"num_tokens\" is ", config_.num_tokens, ", below the vocabulary of ", o_.db, " (",
                                         vocab, " pieces)"),
                          cat("set num_tokens to at least ", vocab));
    }
    if (!o_.no_retrieval && o_.neighbours.empty())
        user_error_in("--knn", "is required (or train the baseline with --no-retrieval)");
    {   // a step of more sequences than the training split holds reads each many times over (and a huge
        // --grad-accum sized per-micro-batch buffers: "internal error: std::bad_alloc")
        const auto train_seqs = static_cast<double>(data_->train_seqs().size());
        if (static_cast<double>(o_.batch_size) * static_cast<double>(o_.grad_accum) > std::max(1.0, train_seqs))
            user_error_in(o_.grad_accum > 1 ? "--batch-size x --grad-accum" : "--batch-size",
                          cat(o_.grad_accum > 1 ? cat(o_.batch_size, " x ", o_.grad_accum, " = ") : std::string(),
                              static_cast<double>(o_.batch_size) * static_cast<double>(o_.grad_accum),   // (an int64 wrapped)
                              " sequences a step; the training split of ", o_.db,
                              " holds ", data_->train_seqs().size()),
                          "a step of at most the training split: a smaller --batch-size (or --grad-accum)");
    }
    // the CPU path's host memory (a GPU run checks the device's in setup_device)
    const double need = o_.device == "cpu" ? train_memory_bytes(config_, o_.batch_size, data_->seq_len(), !o_.no_retrieval)
                                           : double(ParamLayout(config_).total()) * 16;
    memory_require("--batch-size", need,
                   "training " + o_.config + " on micro-batches of " + std::to_string(o_.batch_size) + " x " +
                       std::to_string(data_->seq_len()) + " tokens",
                   "a smaller --batch-size (with --grad-accum for the same global batch) or a smaller model config");
    start_lines_.push_back("memory: about " + memory_format_bytes(need) + " at most (parameters, optimizer state, activations of a micro-batch)");
    // the model, its frozen groups and its step-0 weights (checked before the run folder is touched; a
    // checkpoint overwrites the weights on --resume)
    model_ = std::make_unique<RetroModel<float>>(config_);
    params_init(model_->params(), model_->layout(), o_.seed);
    setup_groups();
    model_->set_trainable(trainable_);
    if (!o_.init_from.empty()) {
        init_ = init_from_resolve(o_.init_from);
        if (fs::exists(fs::path(o_.db) / "manifest.json")) {   // a run's weights learnt another tokenizer's ids
            const RunTokenizer base = run_tokenizer(o_.init_from);
            require_same_tokenizer(o_.init_from, base.fingerprint, "--db " + o_.db, db_tokenizer_fingerprint(manifest_read(o_.db)),
                                   "retro-fit a base trained on a database of the same tokenizer");
        }
        init_from_load(init_, model_->params(), model_->layout(), config_);
        // where in the file the tensors were: a research checkpoint's key, a wrapper's name prefix
        std::string where;
        if (!init_.within.empty()) where = "the state_dict under '" + init_.within + "'";
        if (!init_.prefix.empty()) where += (where.empty() ? "" : "; ") + std::string("names under '") + init_.prefix + "'";
        start_lines_.push_back(cat("init from ", init_.weights, where.empty() ? "" : " (" + where + ")", " (", init_.fingerprint,
                                   "): ", init_.copied, " tensors copied, ", init_.fresh, " fresh from --seed, ", init_.ignored,
                                   " of the base unused"));
        if (!init_.within.empty())   // (an RP user's research checkpoint: its optimizer and step were dropped unsaid)
            start_lines_.push_back(cat("init from ", init_.weights, ": only the weights under '", init_.within,
                                       "' are read, nothing else the file holds (an optimizer's state, a step count): "
                                       "AdamW and the learning-rate schedule start afresh at step 0"));
    }
    AdamWConfig oc;
    oc.lr = o_.lr;
    oc.beta1 = o_.beta1;
    oc.beta2 = o_.beta2;
    oc.eps = o_.eps;
    oc.weight_decay = o_.weight_decay;
    std::vector<double> lr_scale;   // per layout entry: --retrieval-lr-scale for CCA and the encoder
    if (o_.retrieval_lr_scale != 1.0)
        for (const auto& e : model_->layout().entries())
            lr_scale.push_back(param_group(e.name) == ParamGroup::CCA || param_group(e.name) == ParamGroup::ENCODER
                                   ? o_.retrieval_lr_scale
                                   : 1.0);
    opt_ = std::make_unique<AdamW<float>>(model_->layout(), oc, trainable_, lr_scale);
    if (o_.dtype != "fp32" && o_.dtype != "bf16") user_error_in("--dtype", "\"" + o_.dtype + "\" is not fp32 or bf16");
    if (o_.dtype == "bf16" && o_.device == "cpu")
        user_error_in("--dtype", "bf16 trains on the GPU only", "add --device cuda, or train the CPU in fp32");
    if (o_.fused_attention.value_or(false) && o_.dtype != "bf16")
        user_error_in("--fused-attention", "the fused attention kernels are bf16", "add --dtype bf16 --device cuda");
    if (o_.fused_attention.has_value() && !*o_.fused_attention && o_.device == "cpu")   // (taken without a word)
        log_warn("--no-fused-attention has no effect on the CPU, which has no fused attention kernel");
    if (o_.oracle_splice && o_.oracle_neighbours <= 0)
        user_error_in("--oracle-splice", "splices the oracle neighbours, and there are none", "add --oracle-neighbours P");
    if (o_.oracle_hindsight && o_.oracle_neighbours <= 0)
        user_error_in("--oracle-hindsight", "chooses the oracle neighbours, and there are none", "add --oracle-neighbours P");
    if (o_.oracle_hindsight && o_.oracle_splice)
        user_error_in("--oracle-hindsight", "reads a real neighbour, which --oracle-splice has nothing to splice into",
                      "choose one of them");
    if (o_.oracle_until < 0) user_error_in("--oracle-until", cat(o_.oracle_until, " is not a step"), "give 0 or a step");
    if (o_.oracle_until > 0 && o_.oracle_neighbours <= 0)
        user_error_in("--oracle-until", "ends the oracle neighbours, and there are none", "add --oracle-neighbours P");
    if (o_.device != "cpu") setup_device();   // before the run folder is touched: refusals leave it alone
    const fs::path out(o_.out);
    // --force removes only a run's own files (below); rank 0 alone writes, and holds the folder's lock
    // (the manifest first: a --force stopped midway leaves an unfinished run, not a finished one without its model)
    static const char* const kForceRemoves[] = {"manifest.json", "checkpoints", "model.safetensors", "metrics.jsonl"};
    output_folder_guard(o_.out, ctx_.tool, inputs, false, dist_->root());   // again, with the folder's lock
    if (o_.force && !o_.resume)   // an input among the files --force deletes is refused first (a --db beside them is not)
        for (const auto& in : inputs)
            for (const char* own : kForceRemoves)
                if (!in.path.empty() && path_inside(path_resolved(in.path), path_resolved((out / own).string())))
                    user_error_in(o_.out, cat("holds an input of this run (", in.option, " ", in.path,
                                              "), which --force would delete"),
                                  "choose another --out, or copy the input out of it first");
    const bool has_run = holds_run(o_.out, true);
    if (has_run && !o_.resume && !o_.force)
        user_error_in(o_.out, "already holds a run", "pass --resume to continue it or --force to start over");
    dist_->barrier();   // every rank has looked at --out before rank 0 writes into it
    const bool root = dist_->root();
    if (has_run && o_.force && !o_.resume && root)
        for (const char* own : kForceRemoves) fs::remove_all(out / own);
    if (root) fs::create_directories(out);
    if (root) {   // rank 0 says where to resume when the run is stopped (the launcher stops the others)
        train_stop_install(dist_->active(), o_.force);
    }

    std::int64_t step = 0;
    if (o_.resume) {
        const std::string ck = latest_checkpoint(o_.out);
        if (!ck.empty()) {
            step = load_checkpoint(ck);
            if (step == o_.steps && fs::exists(out / "manifest.json") && fs::exists(out / "model.safetensors")) {
                log_info(cat(o_.out, " is already complete (step ", step, " of ", o_.steps, "); nothing to resume"));
                return;
            }
            start_lines_say();
            log_info(cat("resuming from ", ck, " at step ", step));
        } else if (fs::exists(out / "manifest.json")) {
            // a finished run whose checkpoints were removed: --resume would train a new model over it
            user_error_in(o_.out, "holds a finished run and no checkpoint to continue it from",
                          "train further from its weights into a new --out with --init-from " + o_.out +
                              ", or start over with --force");
        } else if (fs::exists(out / "model.safetensors")) {
            // weights without the manifest written after them: a --force stopped as it removed the run (manifest
            // first, then checkpoints/), or a run stopped as it finished; --init-from refuses them too (a helper's kill
            // soak, session 68: the fix above pointed there)
            user_error_in(o_.out, "holds a model.safetensors without its manifest.json and no checkpoint: a run (or a --force) "
                                  "stopped as it wrote or removed its files, nothing to continue from",
                          "start over with --force");
        } else {
            log_info("no complete checkpoint to resume from: starting at step 0");
        }
        if (!ck.empty()) train_stop_set_resume_step(o_.out, step);
        // keep the metrics of the steps the checkpoint covers
        const fs::path mp = out / "metrics.jsonl";
        if (root && (fs::exists(mp) || step > 0)) metrics_missing_ = metrics_keep_through(mp.string(), step, metrics_missing_);
    }
    start_lines_say();
    // metrics.jsonl first: a folder that holds config.json is known as a run's only beside it (or checkpoints/), and
    // a kill during a long first step left config.json alone, a folder no tool claimed
    if (root && !fs::exists(out / "metrics.jsonl")) write_file_atomic((out / "metrics.jsonl").string(), "");
    if (root) config_.save((out / "config.json").string());
    if (dmodel_) device_upload_state();

    if (step < o_.steps && o_.warmup >= o_.steps)   // the default 100 against a short run: a word as it starts
        log_warn(cat("--warmup ", o_.warmup, " is not below --steps ", o_.steps, ": the learning rate rises for the whole run (to ",
                     o_.lr * static_cast<double>(o_.steps) / static_cast<double>(o_.warmup),
                     " at the last step) and never decays; a warmup of about a tenth of the steps is usual"));
    const std::int64_t tokens_per_step = o_.batch_size * o_.grad_accum * data_->seq_len();
    std::int64_t done_now = 0;
    const auto steps_began = std::chrono::steady_clock::now();   // this process's steps (validation, checkpoints
                                                                 // included), for the time left its lines show
    train_stop_after_step(root && !dist_->active());
    while (step < o_.steps) {
        const auto t0 = std::chrono::steady_clock::now();
        double loss = 0, norm = 0;
        const double lr = train_lr_at(o_, step);
        step_ = step + 1;
        if (dmodel_) {
            loss = device_step_gradients();
            norm = device_clip_and_step(lr);
        } else {
            std::vector<float>* reduced = nullptr;
            loss = accumulate_step_gradients(reduced);
            // global norm of the trainable tensors only (frozen ones take no step; torch clips what it optimises)
            auto& grads = *reduced;
            double sq = 0;
            for (const auto& [b, e] : opt_->ranges())
                for (std::int64_t i = b; i < e; i++) sq += static_cast<double>(grads[i]) * grads[i];
            norm = std::sqrt(sq);
            if (const float s = train_clip_scale(norm, o_.clip); s != 1.0f)
                for (const auto& [b, e] : opt_->ranges())
                    for (std::int64_t i = b; i < e; i++) grads[i] *= s;
            opt_->step(model_->params(), grads, lr);
        }
        step++;
        done_now++;
        if (step == o_.kill_step && dist_->rank() == o_.kill_rank) std::raise(SIGKILL);   // testing: a rank dies
        if (dmodel_) backend_->synchronize();   // the step's queued clipping and AdamW belong to this step's time
        const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        std::string line = "{\"step\": " + std::to_string(step) + ", \"loss\": " + json_num(loss) + ", \"lr\": " + json_num(lr) +
                           ", \"grad_norm\": " + json_num(norm) + ", \"tokens_per_s\": " + json_num(tokens_per_step / secs);
        if (mfu_) {   // model FLOPs utilisation against the device's dense bf16 peak (model/model_flops.h)
            const double flops = train_step_flops(config_, o_.batch_size, data_->seq_len(), !o_.no_retrieval).step() *
                                 static_cast<double>(o_.grad_accum);
            line += ", \"mfu\": " + (peak_flops_ > 0 ? json_num(flops / secs / peak_flops_) : std::string("\"n/a\""));
        }
        if (step == 1 && (!init_.weights.empty() || !o_.train_only.empty())) line += provenance_fields();
        const bool last = step == o_.steps;
        if ((o_.val_every > 0 && step % o_.val_every == 0) || last) {
            const double vl = validate();
            if (std::isfinite(vl)) line += ", \"val_loss\": " + num(vl);
        }
        line += "}";
        if (root) append_metrics(line);
        const double step_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - steps_began).count();
        // the stderr copy also says how far the run is: the step count and the time left at this session's mean step
        // (a run of many steps printed neither; metrics.jsonl keeps its fields)
        if (!ctx_.quiet && root)
            log_info(line.substr(0, line.size() - 1) + ", \"of\": " + std::to_string(o_.steps) + ", \"left\": \"" +
                     format_seconds(step_seconds / static_cast<double>(done_now) * static_cast<double>(o_.steps - step)) +
                     "\"}");
        if (!std::isfinite(loss) || !std::isfinite(norm))   // the weights are lost: stop before a checkpoint keeps them
            user_error_in(o_.out, cat("step ", step, ": training diverged (loss ", num(loss), ", gradient norm ", num(norm),
                                      "); no model written"),
                          cat("a smaller --lr than ", o_.lr,
                              o_.retrieval_lr_scale > 1 ? cat(" or --retrieval-lr-scale than ", o_.retrieval_lr_scale) : std::string(),
                              (o_.clip > 0 ? "" : ", or --clip 1"),
                              "; the checkpoints before this step are kept"));
        const int stop = train_stop_requested();   // (a signal after this line waits for the next step)
        if ((o_.checkpoint_every > 0 && step % o_.checkpoint_every == 0) || last || stop) {
            if (dmodel_) device_download_state();
            check_ranks_agree(step);
            if (root) save_checkpoint(step);
        }
        if (stop && !last) {   // the step's checkpoint is complete: stop, as the signal asked, saying where to resume
            train_stop_set_resume_step(o_.out, step);
            train_stop_now(stop);
        }
        if (o_.stop_after > 0 && done_now >= o_.stop_after) return;   // as if killed here
    }
    // a first signal while the final files are written waits for them too (a second stops at once), as one during a step:
    // timeout's repeated SIGINT stopped the run half way through its weights (a review, session 69)
    if (!root) return;   // rank 0 writes the run's final files
    // (before the weights: a refused run leaves its checkpoints, not weights without a manifest; Manifest::write checks
    // again, the seconds the weights take to write included)
    input_stamps_check({o_.db, o_.no_retrieval ? std::string() : o_.neighbours, o_.config});
    params_save((out / "model.safetensors").string(), model_->params(), model_->layout(), config_);
    Manifest m(ctx_);
    m.parameters() = {{"steps", o_.steps},       {"seed", o_.seed},           {"batch_size", o_.batch_size},
                      {"grad_accum", o_.grad_accum}, {"lr", o_.lr},           {"min_lr_ratio", o_.min_lr_ratio},
                      {"warmup", o_.warmup},     {"weight_decay", o_.weight_decay}, {"beta1", o_.beta1},
                      {"beta2", o_.beta2},       {"eps", o_.eps},             {"clip", o_.clip},
                      {"val_fraction", o_.val_fraction}, {"train_docs_fraction", o_.train_docs_fraction},
                      {"val_every", o_.val_every}, {"val_batches", o_.val_batches},
                      {"checkpoint_every", o_.checkpoint_every}, {"keep_checkpoints", o_.keep_checkpoints},
                      {"no_retrieval", o_.no_retrieval},
                      {"train_only", train_only_}, {"trainable_parameters", trainable_count_},
                      {"ranks", N},              {"reduce", o_.reduce},
                      {"device", o_.device},     {"dtype", o_.dtype}, {"fused_attention", fused_attention()},
                      {"neighbour_continuation", kNeighbourContinuationRule},
                      {"retrieval_lr_scale", o_.retrieval_lr_scale},
                      {"retrieval_dropout", o_.retrieval_dropout}, {"oracle_neighbours", o_.oracle_neighbours},
                      {"oracle_splice", o_.oracle_splice},  {"oracle_until", o_.oracle_until},
                      {"oracle_hindsight", o_.oracle_hindsight},
                      {"model", config_.to_json()}};
    if (continuation_from_step_ > 0) m.parameters()["neighbour_continuation_from_step"] = continuation_from_step_;
    if (!init_.weights.empty()) {
        m.parameters()["init_from"] = {
            {"path", o_.init_from}, {"weights", init_.weights}, {"fingerprint", init_.fingerprint}};
        if (!init_.within.empty()) m.parameters()["init_from"]["within"] = init_.within;
        if (!init_.prefix.empty()) m.parameters()["init_from"]["prefix"] = init_.prefix;
        m.add_input_as_read("init_from", init_.weights, init_.bytes, init_.fingerprint);
    }
    if (fs::exists(fs::path(o_.db) / "manifest.json")) m.add_input_folder("db", o_.db);
    if (!o_.no_retrieval && fs::exists(fs::path(o_.neighbours) / "manifest.json"))
        m.add_input_folder("neighbours", o_.neighbours);
    m.add_input("config", o_.config);
    m.add_output(o_.out, "config.json");
    m.add_output(o_.out, "model.safetensors");
    m.add_output(o_.out, "metrics.jsonl");
    m.write(o_.out);
    log_info(cat("wrote ", o_.out, ": model.safetensors after ", o_.steps, " steps (", trainable_count_, " trainable parameters)"));
    // a stop asked for during the last step: the run is whole, and the signal still ends the process, as after any
    // other step (a script's Ctrl-C stops the script; it went on with exit 0: a helper's kill soak, session 68)
    if (const int stop = train_stop_requested(); stop != 0) {
        train_stop_set_finished(o_.out);
        train_stop_now(stop);
    }
    train_stop_after_step(false);   // (a signal now stops at once, as before the steps)
}

}  // namespace train_impl

void train_run(const ToolContext& ctx, const TrainOptions& opts) {
    heap_keep_freed_memory();   // the same buffers are freed and reallocated every step
    const Distributed& d = distributed("retro-train");
    if (d.active()) {
        if (ctx.threads == 0)   // all cores shared by the ranks on this machine, not each rank taking them all
            set_thread_count(std::max(1, hardware_threads() / std::max(1, d.local_size())));
        if (!d.root()) log_set_level(LogLevel::LOG_ERROR);   // one voice: rank 0's
    }
    train_impl::Trainer t(ctx, opts);
    t.run();
}

}  // namespace retro
