/* The record loop of the RecordBatch v2 reader in C: the consumer's hot path.
 *
 * Optional: built by `pip install` where a C compiler is present (setup.py marks it optional);
 * record_loop.py falls back to its pure-Python loop (`decode_into_py`) when this module is
 * missing, and the unit tests run both. Each function parses the records of ONE batch, exactly
 * as decode_into_py does: same fields, same checks, same error messages (raised as ValueError,
 * turned into InvalidBatchError by record_loop.py).
 *
 *   decode_into(buf, start, end, count, base_offset, base_ts, min_offset,
 *               offsets, timestamps, keys, values, headers) -> added
 *       appends one item per record at or after min_offset to each of the five lists.
 *   rows_into(buf, start, end, count, base_offset, base_ts, min_offset,
 *             row_type, topic, partition, ts_type, fixed_ts, out) -> added
 *       appends row_type(topic, partition, offset, timestamp, ts_type, key, value, headers)
 *       (a tuple subclass of 8 fields, built like tuple.__new__ builds one) to `out`;
 *       fixed_ts replaces every timestamp unless it is None (log append time). Rows of
 *       records without headers are not tracked by the cycle collector (see below).
 *
 *   wire_into(buf, start, end, count, base_offset, base_ts, min_offset, ts_type, fixed_ts,
 *             limit, out) -> (added, last_offset)
 *       appends, for each record at or after min_offset (at most `limit` of them, 0: all), the
 *       record as a protobuf `riverlog.v1.Record` in field 3 of FetchRecordsResponse
 *       (tag, length, body) to the bytearray `out`: what the gateway's FetchRecords answers,
 *       without a Python object per record field. last_offset is the last added record's
 *       offset (-1 if none).
 *
 *   Appender(lock, sticky, available, batch_type, future_type, record_overhead, record_memory)
 *       the producer's per-record append in C (decision 0015's addendum): calling it as
 *       appender(topic, timestamp, key, value) takes `lock`, and if `sticky[topic]` (a
 *       `batch_type` with __slots__) is open, has no headers column, has room for the record
 *       (its estimate plus record_overhead plus the key and value lengths within its limit) and
 *       its `available` (buffer.memory's free bytes, kept in C and read and written by the
 *       accumulator as `appender.available`) has record_memory left, appends the
 *       record to the batch's columns, updates count, estimate, reserved and available as the
 *       Python fast path does and returns future_type((batch.result, index)); otherwise it
 *       changes nothing and returns None (the Python path then decides: a new batch, a wait
 *       for memory, a conversion of a non-bytes value).
 *
 *   SendFast(appender, topics, send, max_record, ignore_keys)
 *       Producer.send for the common case, installed as a producer's `send` when nothing
 *       per record needs Python (no serializer, transaction or tracing): a call with only
 *       topic, value and key (a key only with partitioner.ignore.keys; headers, partition and
 *       timestamp_ms may be given positionally as None), bytes or None, to a
 *       topic whose cached metadata (`topics[topic]`, a TopicInfo tuple with expires_at at
 *       index 2, in time.monotonic() seconds) is fresh, stamps the record with the wall clock
 *       in ms (time.time_ns() // 1_000_000) and appends it through `appender`; any other call,
 *       or one `appender` leaves, goes to `send` (the Python send) with its arguments as given.
 *
 * `buf` is bytes or a bytearray; the records are buf[start:end] (no copy of an uncompressed
 * batch's body).
 *
 *   encode_columns(timestamps, keys, values) -> bytes | None
 *       the producer's batch records (no headers) from its columns, byte for byte as
 *       encode_columns.encode_records; None for anything it leaves to the Python path.
 *
 * Also the gateway's ProduceRecords from the request's bytes (produce_request, produce_batches,
 * produce_results; decision 0045), described where they are defined, below wire_into.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>
#include <structmember.h>
#include <time.h>

typedef struct {
    const unsigned char *p;
    Py_ssize_t pos; /* absolute */
    Py_ssize_t start;
    Py_ssize_t end;
} Cursor;

static int past_end(void) {
    PyErr_SetString(PyExc_ValueError, "records run past the end of their batch");
    return -1;
}

/* The raw (zigzagged) varint at c->pos, as varint.read_unsigned. */
static int read_unsigned(Cursor *c, uint64_t *out) {
    Py_ssize_t start = c->pos;
    uint64_t z = 0;
    int shift = 0;
    for (;;) {
        if (c->pos >= c->end) {
            PyErr_Format(PyExc_ValueError, "varint at %zd runs past the end of the records",
                         start - c->start);
            return -1;
        }
        unsigned char b = c->p[c->pos++];
        if (shift == 63 && (b & 0x7F) > 1 && b < 0x80) {
            PyErr_Format(PyExc_ValueError, "varint at %zd overflows 64 bits", start - c->start);
            return -1;
        }
        if (shift <= 63) {
            z |= (uint64_t)(b & 0x7F) << shift;
        }
        if (b < 0x80) {
            *out = z;
            return 0;
        }
        shift += 7;
        if (c->pos - start >= 10) {
            PyErr_Format(PyExc_ValueError, "varint at %zd is longer than 10 bytes",
                         start - c->start);
            return -1;
        }
    }
}

static inline int64_t unzigzag(uint64_t z) { return (int64_t)(z >> 1) ^ -(int64_t)(z & 1); }

/* base + delta as a Python int, exact even past 64 bits. */
static PyObject *add_long(int64_t base, int64_t delta) {
    int64_t sum;
    if (!__builtin_add_overflow(base, delta, &sum)) {
        return PyLong_FromLongLong(sum);
    }
    PyObject *a = PyLong_FromLongLong(base);
    PyObject *b = PyLong_FromLongLong(delta);
    PyObject *r = (a && b) ? PyNumber_Add(a, b) : NULL;
    Py_XDECREF(a);
    Py_XDECREF(b);
    return r;
}

/* A key or value: None for length -1, else bytes; `what` names it in errors. */
static PyObject *read_blob(Cursor *c, const char *what) {
    uint64_t z;
    if (read_unsigned(c, &z) < 0) {
        return NULL;
    }
    if (z & 1) {
        if (z != 1) {
            PyErr_Format(PyExc_ValueError, "negative %s length at %zd of the records", what,
                         c->pos - c->start);
            return NULL;
        }
        Py_RETURN_NONE;
    }
    uint64_t n = z >> 1;
    if (n > (uint64_t)(c->end - c->pos)) {
        past_end();
        return NULL;
    }
    PyObject *blob = PyBytes_FromStringAndSize((const char *)c->p + c->pos, (Py_ssize_t)n);
    c->pos += (Py_ssize_t)n;
    return blob;
}

static PyObject *read_headers(Cursor *c) {
    uint64_t count;
    if (read_unsigned(c, &count) < 0) {
        return NULL;
    }
    if (count & 1) {
        PyErr_SetString(PyExc_ValueError, "negative header count");
        return NULL;
    }
    PyObject *headers = PyList_New(0);
    if (headers == NULL) {
        return NULL;
    }
    for (uint64_t i = 0; i < (count >> 1); i++) {
        uint64_t z;
        if (read_unsigned(c, &z) < 0) {
            goto fail;
        }
        if (z & 1) {
            PyErr_SetString(PyExc_ValueError, "negative header key length");
            goto fail;
        }
        if ((z >> 1) > (uint64_t)(c->end - c->pos)) {
            PyErr_SetString(PyExc_ValueError, "header key runs past the end of the records");
            goto fail;
        }
        PyObject *key = PyUnicode_DecodeUTF8((const char *)c->p + c->pos, (Py_ssize_t)(z >> 1),
                                             "strict");
        if (key == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) {
                PyObject *type, *value, *tb;
                PyErr_Fetch(&type, &value, &tb);
                PyErr_NormalizeException(&type, &value, &tb);
                PyErr_Format(PyExc_ValueError, "header key is not UTF-8: %S", value);
                Py_XDECREF(type);
                Py_XDECREF(value);
                Py_XDECREF(tb);
            }
            goto fail;
        }
        c->pos += (Py_ssize_t)(z >> 1);
        PyObject *value;
        if (read_unsigned(c, &z) < 0) {
            Py_DECREF(key);
            goto fail;
        }
        if (z == 1) {
            value = Py_None;
            Py_INCREF(value);
        } else if (z & 1) {
            Py_DECREF(key);
            PyErr_SetString(PyExc_ValueError, "negative header value length");
            goto fail;
        } else if ((z >> 1) > (uint64_t)(c->end - c->pos)) {
            Py_DECREF(key);
            PyErr_SetString(PyExc_ValueError, "header value runs past the end of the records");
            goto fail;
        } else {
            value = PyBytes_FromStringAndSize((const char *)c->p + c->pos, (Py_ssize_t)(z >> 1));
            if (value == NULL) {
                Py_DECREF(key);
                goto fail;
            }
            c->pos += (Py_ssize_t)(z >> 1);
        }
        PyObject *pair = PyTuple_Pack(2, key, value);
        Py_DECREF(key);
        Py_DECREF(value);
        if (pair == NULL || PyList_Append(headers, pair) < 0) {
            Py_XDECREF(pair);
            goto fail;
        }
        Py_DECREF(pair);
    }
    return headers;
fail:
    Py_DECREF(headers);
    return NULL;
}

typedef struct {
    PyObject *offset, *timestamp, *key, *value, *headers;
} Fields;

static void fields_clear(Fields *f) {
    Py_CLEAR(f->offset);
    Py_CLEAR(f->timestamp);
    Py_CLEAR(f->key);
    Py_CLEAR(f->value);
    Py_CLEAR(f->headers);
}

/* Parse one record at c->pos into `f` (new references); *keep says offset >= min_offset. */
static int read_record(Cursor *c, int64_t base_offset, int64_t base_ts, int64_t min_offset,
                       Fields *f, int *keep) {
    uint64_t z;
    if (read_unsigned(c, &z) < 0) {
        return -1;
    }
    if (z & 1) {
        PyErr_Format(PyExc_ValueError, "negative record length at %zd of the records",
                     c->pos - c->start);
        return -1;
    }
    uint64_t end = (uint64_t)(c->pos - c->start) + (z >> 1);
    if (c->pos >= c->end) {
        return past_end(); /* the attributes byte */
    }
    c->pos += 1;
    if (c->pos >= c->end) {
        return past_end();
    }
    if (read_unsigned(c, &z) < 0) {
        return -1;
    }
    int64_t ts_delta = unzigzag(z);
    if (c->pos >= c->end) {
        return past_end();
    }
    if (read_unsigned(c, &z) < 0) {
        return -1;
    }
    int64_t offset_delta = unzigzag(z);
    if (c->pos >= c->end) {
        return past_end();
    }
    if ((f->key = read_blob(c, "key")) == NULL) {
        return -1;
    }
    if (c->pos >= c->end) {
        return past_end();
    }
    if ((f->value = read_blob(c, "value")) == NULL) {
        return -1;
    }
    if (c->pos >= c->end) {
        return past_end();
    }
    if (c->p[c->pos] == 0) {
        c->pos += 1;
        f->headers = PyList_New(0);
    } else {
        f->headers = read_headers(c);
    }
    if (f->headers == NULL) {
        return -1;
    }
    if ((uint64_t)(c->pos - c->start) != end) {
        PyErr_Format(PyExc_ValueError,
                     "record ending at %zd of the records declared its end at %llu",
                     c->pos - c->start, (unsigned long long)end);
        return -1;
    }
    int64_t offset;
    if (__builtin_add_overflow(base_offset, offset_delta, &offset)) {
        *keep = 1; /* past int64: larger than any min_offset */
    } else {
        *keep = offset >= min_offset;
    }
    if (*keep) {
        f->offset = add_long(base_offset, offset_delta);
        f->timestamp = add_long(base_ts, ts_delta);
        if (f->offset == NULL || f->timestamp == NULL) {
            return -1;
        }
    }
    return 0;
}

/* bytes, or a bytearray (the consumer's direct fetch reads an answer into one, decision
   0047): its pointer is used only within this call, which holds the GIL and never resizes it */
static int check_cursor(PyObject *buf, Py_ssize_t start, Py_ssize_t end, Cursor *c) {
    Py_ssize_t size;
    const char *p;
    if (PyBytes_Check(buf)) {
        size = PyBytes_GET_SIZE(buf);
        p = PyBytes_AS_STRING(buf);
    } else if (PyByteArray_Check(buf)) {
        size = PyByteArray_GET_SIZE(buf);
        p = PyByteArray_AS_STRING(buf);
    } else {
        PyErr_SetString(PyExc_TypeError, "records must be bytes or a bytearray");
        return -1;
    }
    if (start < 0 || end < start || end > size) {
        PyErr_SetString(PyExc_IndexError, "bad records range");
        return -1;
    }
    c->p = (const unsigned char *)p;
    c->pos = start;
    c->start = start;
    c->end = end;
    return 0;
}

static int check_end(Cursor *c) {
    if (c->pos != c->end) {
        PyErr_Format(PyExc_ValueError, "%zd bytes left after the last record of a batch",
                     c->end - c->pos);
        return -1;
    }
    return 0;
}

static PyObject *decode_into(PyObject *self, PyObject *args) {
    PyObject *buf, *lists[5];
    Py_ssize_t start, end, count;
    long long base_offset, base_ts, min_offset;
    if (!PyArg_ParseTuple(args, "OnnnLLLO!O!O!O!O!", &buf, &start, &end, &count, &base_offset,
                          &base_ts, &min_offset, &PyList_Type, &lists[0], &PyList_Type, &lists[1],
                          &PyList_Type, &lists[2], &PyList_Type, &lists[3], &PyList_Type,
                          &lists[4])) {
        return NULL;
    }
    Cursor c;
    if (check_cursor(buf, start, end, &c) < 0) {
        return NULL;
    }
    Py_ssize_t added = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Fields f = {0};
        int keep = 0;
        if (read_record(&c, base_offset, base_ts, min_offset, &f, &keep) < 0) {
            fields_clear(&f);
            return NULL;
        }
        if (keep) {
            PyObject *items[5] = {f.offset, f.timestamp, f.key, f.value, f.headers};
            for (int k = 0; k < 5; k++) {
                if (PyList_Append(lists[k], items[k]) < 0) {
                    fields_clear(&f);
                    return NULL;
                }
            }
            added++;
        }
        fields_clear(&f);
    }
    if (check_end(&c) < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(added);
}

static PyObject *rows_into(PyObject *self, PyObject *args) {
    PyObject *buf, *row_type_obj, *topic, *partition, *ts_type, *fixed_ts, *out;
    Py_ssize_t start, end, count;
    long long base_offset, base_ts, min_offset;
    if (!PyArg_ParseTuple(args, "OnnnLLLO!OOOOO!", &buf, &start, &end, &count, &base_offset,
                          &base_ts, &min_offset, &PyType_Type, &row_type_obj, &topic, &partition,
                          &ts_type, &fixed_ts, &PyList_Type, &out)) {
        return NULL;
    }
    PyTypeObject *row_type = (PyTypeObject *)row_type_obj;
    if (!PyType_IsSubtype(row_type, &PyTuple_Type) ||
        row_type->tp_itemsize != (Py_ssize_t)sizeof(PyObject *)) {
        PyErr_SetString(PyExc_TypeError, "row_type must be a tuple subclass");
        return NULL;
    }
    Cursor c;
    if (check_cursor(buf, start, end, &c) < 0) {
        return NULL;
    }
    Py_ssize_t added = 0;
    for (Py_ssize_t i = 0; i < count; i++) {
        Fields f = {0};
        int keep = 0;
        if (read_record(&c, base_offset, base_ts, min_offset, &f, &keep) < 0) {
            fields_clear(&f);
            return NULL;
        }
        if (keep) {
            PyObject *row = row_type->tp_alloc(row_type, 8);
            if (row == NULL) {
                fields_clear(&f);
                return NULL;
            }
            PyObject *timestamp = f.timestamp;
            if (fixed_ts != Py_None) {
                timestamp = fixed_ts;
                Py_INCREF(timestamp);
                Py_CLEAR(f.timestamp);
            }
            Py_INCREF(topic);
            Py_INCREF(partition);
            Py_INCREF(ts_type);
            PyTuple_SET_ITEM(row, 0, topic);
            PyTuple_SET_ITEM(row, 1, partition);
            PyTuple_SET_ITEM(row, 2, f.offset);
            PyTuple_SET_ITEM(row, 3, timestamp);
            PyTuple_SET_ITEM(row, 4, ts_type);
            PyTuple_SET_ITEM(row, 5, f.key);
            PyTuple_SET_ITEM(row, 6, f.value);
            PyTuple_SET_ITEM(row, 7, f.headers);
            if (PyList_GET_SIZE(f.headers) == 0) {
                /* Out of the cycle collector's sight (issue 10): the row then holds only
                 * atomic values and an empty list, so it cannot be part of a cycle. Tracked,
                 * a thousand rows a fetch made the collector run every few hundred records
                 * and promoted them into the older generations, whose full passes cost the
                 * consumer up to a third of its CPU (decision 0016, addendum). The list stays
                 * an ordinary list; only a cycle the application builds through it (a header
                 * list that holds itself) would wait for the row to be freed. Rows with
                 * headers stay tracked. */
                PyObject_GC_UnTrack(f.headers);
                PyObject_GC_UnTrack(row);
            }
            int failed = PyList_Append(out, row);
            Py_DECREF(row); /* owns the fields now */
            if (failed < 0) {
                return NULL;
            }
            added++;
        } else {
            fields_clear(&f);
        }
    }
    if (check_end(&c) < 0) {
        return NULL;
    }
    return PyLong_FromSsize_t(added);
}

/* --- protobuf wire encoding of riverlog.v1.Record (wire_into) ----------------------------- */

typedef struct {
    unsigned char *p;
    size_t len, cap;
} Buf;

static int buf_reserve(Buf *b, size_t more) {
    if (b->len + more <= b->cap) {
        return 0;
    }
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + more) {
        cap *= 2;
    }
    unsigned char *p = PyMem_Realloc(b->p, cap);
    if (p == NULL) {
        PyErr_NoMemory();
        return -1;
    }
    b->p = p;
    b->cap = cap;
    return 0;
}

static int put_varint(Buf *b, uint64_t v) {
    if (buf_reserve(b, 10) < 0) {
        return -1;
    }
    while (v >= 0x80) {
        b->p[b->len++] = (unsigned char)(v | 0x80);
        v >>= 7;
    }
    b->p[b->len++] = (unsigned char)v;
    return 0;
}

static int put_bytes(Buf *b, unsigned char tag, const char *data, Py_ssize_t n) {
    if (n <= 0) {
        return 0; /* proto3: an empty string or bytes field is not written */
    }
    if (put_varint(b, tag) < 0 || put_varint(b, (uint64_t)n) < 0 || buf_reserve(b, n) < 0) {
        return -1;
    }
    memcpy(b->p + b->len, data, (size_t)n);
    b->len += (size_t)n;
    return 0;
}

static int put_int(Buf *b, unsigned char tag, PyObject *value) {
    long long v = PyLong_AsLongLong(value);
    if (v == -1 && PyErr_Occurred()) {
        return -1;
    }
    if (v == 0) {
        return 0;
    }
    if (put_varint(b, tag) < 0) {
        return -1;
    }
    return put_varint(b, (uint64_t)v); /* negative int64: ten bytes, as protobuf writes it */
}

/* Record { key=1, has_key=2, value=3, has_value=4, headers=5 {key=1, value=2},
 *          timestamp_ms=6, offset=7, timestamp_type=8 } */
static int put_record(Buf *body, Buf *scratch, Fields *f, PyObject *timestamp, long ts_type) {
    body->len = 0;
    if (f->key != Py_None) {
        if (put_bytes(body, 0x0A, PyBytes_AS_STRING(f->key), PyBytes_GET_SIZE(f->key)) < 0 ||
            put_varint(body, 0x10) < 0 || put_varint(body, 1) < 0) {
            return -1;
        }
    }
    if (f->value != Py_None) {
        if (put_bytes(body, 0x1A, PyBytes_AS_STRING(f->value), PyBytes_GET_SIZE(f->value)) < 0 ||
            put_varint(body, 0x20) < 0 || put_varint(body, 1) < 0) {
            return -1;
        }
    }
    Py_ssize_t n = PyList_GET_SIZE(f->headers);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *pair = PyList_GET_ITEM(f->headers, i);
        Py_ssize_t klen;
        const char *k = PyUnicode_AsUTF8AndSize(PyTuple_GET_ITEM(pair, 0), &klen);
        if (k == NULL) {
            return -1;
        }
        PyObject *v = PyTuple_GET_ITEM(pair, 1);
        scratch->len = 0;
        if (put_bytes(scratch, 0x0A, k, klen) < 0) {
            return -1;
        }
        if (v != Py_None &&
            put_bytes(scratch, 0x12, PyBytes_AS_STRING(v), PyBytes_GET_SIZE(v)) < 0) {
            return -1;
        }
        if (put_varint(body, 0x2A) < 0 || put_varint(body, scratch->len) < 0 ||
            buf_reserve(body, scratch->len) < 0) {
            return -1;
        }
        memcpy(body->p + body->len, scratch->p, scratch->len);
        body->len += scratch->len;
    }
    if (put_int(body, 0x30, timestamp) < 0 || put_int(body, 0x38, f->offset) < 0) {
        return -1;
    }
    if (ts_type != 0 && (put_varint(body, 0x40) < 0 || put_varint(body, (uint64_t)ts_type) < 0)) {
        return -1;
    }
    return 0;
}

static PyObject *wire_into(PyObject *self, PyObject *args) {
    PyObject *buf, *fixed_ts, *out;
    Py_ssize_t start, end, count, limit;
    long long base_offset, base_ts, min_offset;
    long ts_type;
    if (!PyArg_ParseTuple(args, "OnnnLLLlOnO!", &buf, &start, &end, &count, &base_offset,
                          &base_ts, &min_offset, &ts_type, &fixed_ts, &limit, &PyByteArray_Type,
                          &out)) {
        return NULL;
    }
    Cursor c;
    if (check_cursor(buf, start, end, &c) < 0) {
        return NULL;
    }
    Buf body = {0}, scratch = {0}, all = {0};
    Py_ssize_t added = 0;
    long long last = -1;
    PyObject *result = NULL;
    for (Py_ssize_t i = 0; i < count && (limit <= 0 || added < limit); i++) {
        Fields f = {0};
        int keep = 0;
        if (read_record(&c, base_offset, base_ts, min_offset, &f, &keep) < 0) {
            fields_clear(&f);
            goto done;
        }
        if (keep) {
            PyObject *timestamp = fixed_ts != Py_None ? fixed_ts : f.timestamp;
            if (put_record(&body, &scratch, &f, timestamp, ts_type) < 0 ||
                put_varint(&all, 0x1A) < 0 || put_varint(&all, body.len) < 0 ||
                buf_reserve(&all, body.len) < 0) {
                fields_clear(&f);
                goto done;
            }
            memcpy(all.p + all.len, body.p, body.len);
            all.len += body.len;
            last = PyLong_AsLongLong(f.offset);
            if (last == -1 && PyErr_Occurred()) {
                fields_clear(&f);
                goto done;
            }
            added++;
        }
        fields_clear(&f);
    }
    if ((limit <= 0 || added < limit) && check_end(&c) < 0) {
        goto done;
    }
    Py_ssize_t before = PyByteArray_GET_SIZE(out);
    if (PyByteArray_Resize(out, before + (Py_ssize_t)all.len) < 0) {
        goto done;
    }
    if (all.len) {
        memcpy(PyByteArray_AS_STRING(out) + before, all.p, all.len);
    }
    result = Py_BuildValue("nL", added, last);
done:
    PyMem_Free(body.p);
    PyMem_Free(scratch.p);
    PyMem_Free(all.p);
    return result;
}

/* --- ProduceRecords: the serialized request straight into RecordBatch v2 bodies --------------
 *
 *   produce_request(buf) -> (topic, partition, acks, timeout_ms, compression_type, count)
 *       the fields of a serialized riverlog.v1.ProduceRecordsRequest other than its records
 *       (partition None when absent; count: how many records), with protobuf's checks: UTF-8
 *       strings, lengths and varints within the buffer, known fields of the right wire type.
 *   produce_batches(buf, partition, partitions, sticky, now_ms, batch_size)
 *       -> (groups, assign, bad)
 *       the records' partitions (`partition` when >= 0; else Kafka's murmur2 of the key; else
 *       sticky(), called once, for every keyless record) and each partition's records encoded
 *       (a timestamp of 0 becomes now_ms) as the gateway's `_encode` encodes them: one batch
 *       body when they fit BATCH_SIZE by its estimate, else split as BatchBuilder splits.
 *       groups: [(partition, [(records, count, base_ts, max_ts), ...], records)] by partition;
 *       assign: native int32 per record, its group (-1: a negative timestamp); bad: [(index,
 *       timestamp)] of the records with a negative timestamp.
 *   produce_results(assign, partitions, offsets, codes, messages, bad_code, bad_messages)
 *       -> bytes: ProduceRecordsResponse's repeated `results` (field 1), one per record in
 *       request order: (partition, base offset + place, or -1 when the group's code is set or
 *       its base offset is negative); a bad record gets (-1, -1, bad_code, its message).
 */

typedef struct {
    const unsigned char *p;
    const unsigned char *end;
} Wire;

static int wire_error(const char *what) {
    PyErr_Format(PyExc_ValueError, "malformed ProduceRecordsRequest: %s", what);
    return -1;
}

static int wire_varint(Wire *w, uint64_t *out) {
    uint64_t v = 0;
    for (int shift = 0; shift < 70; shift += 7) {
        if (w->p >= w->end) {
            return wire_error("a varint runs past the end");
        }
        unsigned char b = *w->p++;
        if (shift < 64) {
            v |= (uint64_t)(b & 0x7F) << shift;
        }
        if (b < 0x80) {
            *out = v;
            return 0;
        }
    }
    return wire_error("a varint is longer than 10 bytes");
}

/* A length-delimited field's bytes. */
static int wire_bytes(Wire *w, const unsigned char **data, Py_ssize_t *len) {
    uint64_t n;
    if (wire_varint(w, &n) < 0) {
        return -1;
    }
    if (n > (uint64_t)(w->end - w->p)) {
        return wire_error("a field runs past the end");
    }
    *data = w->p;
    *len = (Py_ssize_t)n;
    w->p += n;
    return 0;
}

static int wire_skip(Wire *w, unsigned wire_type) {
    uint64_t v;
    const unsigned char *d;
    Py_ssize_t n;
    switch (wire_type) {
    case 0:
        return wire_varint(w, &v);
    case 1:
    case 5: {
        Py_ssize_t size = wire_type == 1 ? 8 : 4;
        if (w->end - w->p < size) {
            return wire_error("a fixed-size field runs past the end");
        }
        w->p += size;
        return 0;
    }
    case 2:
        return wire_bytes(w, &d, &n);
    default:
        return wire_error("unsupported wire type");
    }
}

/* The next field's number and wire type; 0 at the end. */
static int wire_tag(Wire *w, uint64_t *field, unsigned *wire_type) {
    uint64_t tag;
    if (wire_varint(w, &tag) < 0) {
        return -1;
    }
    *field = tag >> 3;
    *wire_type = (unsigned)(tag & 7);
    if (*field == 0 || *field > 0x1FFFFFFF) {
        return wire_error("a field number out of range");
    }
    return 1;
}

static int expect_type(unsigned got, unsigned want) {
    return got == want ? 0 : wire_error("a known field has the wrong wire type");
}

static int check_utf8(const unsigned char *data, Py_ssize_t len, const char *what) {
    PyObject *s = PyUnicode_DecodeUTF8((const char *)data, len, "strict");
    if (s == NULL) {
        PyErr_Clear();
        PyErr_Format(PyExc_ValueError, "malformed ProduceRecordsRequest: %s is not UTF-8", what);
        return -1;
    }
    Py_DECREF(s);
    return 0;
}

static PyObject *produce_request(PyObject *self, PyObject *args) {
    Py_buffer view;
    if (!PyArg_ParseTuple(args, "y*", &view)) {
        return NULL;
    }
    Wire w = {view.buf, (const unsigned char *)view.buf + view.len};
    const unsigned char *topic = (const unsigned char *)"", *codec = (const unsigned char *)"";
    Py_ssize_t topic_len = 0, codec_len = 0, count = 0;
    int has_partition = 0;
    int32_t partition = 0, acks = 0, timeout = 0;
    PyObject *result = NULL;
    while (w.p < w.end) {
        uint64_t field, v;
        unsigned wt;
        const unsigned char *d;
        Py_ssize_t n;
        if (wire_tag(&w, &field, &wt) < 0) {
            goto done;
        }
        switch (field) {
        case 1:
        case 6:
            if (expect_type(wt, 2) < 0 || wire_bytes(&w, &d, &n) < 0) {
                goto done;
            }
            if (field == 1) {
                topic = d;
                topic_len = n;
            } else {
                codec = d;
                codec_len = n;
            }
            break;
        case 3:
            if (expect_type(wt, 2) < 0 || wire_bytes(&w, &d, &n) < 0) {
                goto done;
            }
            count++;
            break;
        case 2:
        case 4:
        case 5:
            if (expect_type(wt, 0) < 0 || wire_varint(&w, &v) < 0) {
                goto done;
            }
            if (field == 2) {
                has_partition = 1;
                partition = (int32_t)(uint32_t)v;
            } else if (field == 4) {
                acks = (int32_t)(uint32_t)v;
            } else {
                timeout = (int32_t)(uint32_t)v;
            }
            break;
        default:
            if (wire_skip(&w, wt) < 0) {
                goto done;
            }
        }
    }
    PyObject *t = PyUnicode_DecodeUTF8((const char *)topic, topic_len, "strict");
    PyObject *c = t ? PyUnicode_DecodeUTF8((const char *)codec, codec_len, "strict") : NULL;
    if (t == NULL || c == NULL) {
        Py_XDECREF(t);
        PyErr_Clear();
        wire_error("a string is not UTF-8");
        goto done;
    }
    PyObject *p = has_partition ? PyLong_FromLong(partition) : Py_NewRef(Py_None);
    if (p != NULL) {
        result = Py_BuildValue("NNiiNn", t, p, (int)acks, (int)timeout, c, count);
    } else {
        Py_DECREF(t);
        Py_DECREF(c);
    }
done:
    PyBuffer_Release(&view);
    return result;
}

/* One record of the request: where its parts are in the buffer. */
typedef struct {
    const unsigned char *key, *value, *start, *end; /* start..end: the Record message */
    Py_ssize_t key_len, value_len;
    int64_t timestamp;
    Py_ssize_t headers_size; /* encoded headers (count and headers); 0: no headers */
    uint64_t header_count;
    int has_key, has_value;
    int32_t partition;
} PlainRecord;

static inline int zz_size(int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    int n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline void put_zz(unsigned char **out, int64_t v) {
    uint64_t z = ((uint64_t)v << 1) ^ (uint64_t)(v >> 63);
    unsigned char *p = *out;
    while (z >= 0x80) {
        *p++ = (unsigned char)(z | 0x80);
        z >>= 7;
    }
    *p++ = (unsigned char)z;
    *out = p;
}

/* A Header message {key=1 string, value=2 bytes}: its key and value (last occurrence wins). */
static int parse_header(const unsigned char *data, Py_ssize_t len, const unsigned char **key,
                        Py_ssize_t *key_len, const unsigned char **value, Py_ssize_t *value_len) {
    Wire w = {data, data + len};
    *key = *value = data;
    *key_len = *value_len = 0;
    while (w.p < w.end) {
        uint64_t field;
        unsigned wt;
        if (wire_tag(&w, &field, &wt) < 0) {
            return -1;
        }
        if (field == 1 || field == 2) {
            if (expect_type(wt, 2) < 0 ||
                wire_bytes(&w, field == 1 ? key : value, field == 1 ? key_len : value_len) < 0) {
                return -1;
            }
        } else if (wire_skip(&w, wt) < 0) {
            return -1;
        }
    }
    return 0;
}

static int parse_record(const unsigned char *data, Py_ssize_t len, PlainRecord *r) {
    Wire w = {data, data + len};
    memset(r, 0, sizeof(*r));
    r->start = data;
    r->end = data + len;
    r->key = r->value = data;
    Py_ssize_t headers = 0;
    while (w.p < w.end) {
        uint64_t field, v;
        unsigned wt;
        const unsigned char *d;
        Py_ssize_t n;
        if (wire_tag(&w, &field, &wt) < 0) {
            return -1;
        }
        switch (field) {
        case 1:
            if (expect_type(wt, 2) < 0 || wire_bytes(&w, &r->key, &r->key_len) < 0) {
                return -1;
            }
            break;
        case 3:
            if (expect_type(wt, 2) < 0 || wire_bytes(&w, &r->value, &r->value_len) < 0) {
                return -1;
            }
            break;
        case 5: {
            const unsigned char *k, *hv;
            Py_ssize_t kn, hvn;
            if (expect_type(wt, 2) < 0 || wire_bytes(&w, &d, &n) < 0 ||
                parse_header(d, n, &k, &kn, &hv, &hvn) < 0 ||
                check_utf8(k, kn, "a header key") < 0) {
                return -1;
            }
            r->header_count++;
            headers += zz_size(kn) + kn + zz_size(hvn) + hvn;
            break;
        }
        case 2:
        case 4:
        case 6:
        case 7:
        case 8:
            if (expect_type(wt, 0) < 0 || wire_varint(&w, &v) < 0) {
                return -1;
            }
            if (field == 2) {
                r->has_key = v != 0;
            } else if (field == 4) {
                r->has_value = v != 0;
            } else if (field == 6) {
                r->timestamp = (int64_t)v;
            }
            break;
        default:
            if (wire_skip(&w, wt) < 0) {
                return -1;
            }
        }
    }
    if (r->header_count > 0x7FFFFFFF) {
        return wire_error("too many headers");
    }
    r->has_key = r->has_key || r->key_len > 0;
    r->has_value = r->has_value || r->value_len > 0;
    if (r->header_count) {
        r->headers_size = zz_size((int64_t)r->header_count) + headers;
    }
    return 0;
}

/* Kafka's Utils.murmur2. */
static int32_t murmur2(const unsigned char *data, Py_ssize_t length) {
    const uint32_t m = 0x5bd1e995;
    uint32_t h = 0x9747b28cU ^ (uint32_t)length;
    Py_ssize_t blocks = length / 4;
    for (Py_ssize_t i = 0; i < blocks; i++) {
        const unsigned char *b = data + 4 * i;
        uint32_t k = (uint32_t)b[0] | ((uint32_t)b[1] << 8) | ((uint32_t)b[2] << 16) |
                     ((uint32_t)b[3] << 24);
        k *= m;
        k ^= k >> 24;
        k *= m;
        h *= m;
        h ^= k;
    }
    const unsigned char *tail = data + 4 * blocks;
    switch (length & 3) {
    case 3:
        h ^= (uint32_t)tail[2] << 16;
        /* fall through */
    case 2:
        h ^= (uint32_t)tail[1] << 8;
        /* fall through */
    case 1:
        h ^= (uint32_t)tail[0];
        h *= m;
    }
    h ^= h >> 13;
    h *= m;
    h ^= h >> 15;
    return (int32_t)h;
}

static int cmp_u64(const void *a, const void *b) {
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* The body of one record (attributes .. headers) and its size. */
static Py_ssize_t record_body_size(const PlainRecord *r, int64_t ts_delta, int64_t offset_delta) {
    return 1 + zz_size(ts_delta) + zz_size(offset_delta) +
           (r->has_key ? zz_size(r->key_len) + r->key_len : 1) +
           (r->has_value ? zz_size(r->value_len) + r->value_len : 1) +
           (r->header_count ? r->headers_size : 1);
}

static void put_record_v2(unsigned char **out, const PlainRecord *r, Py_ssize_t body,
                          int64_t ts_delta, int64_t offset_delta) {
    put_zz(out, body);
    *(*out)++ = 0; /* attributes */
    put_zz(out, ts_delta);
    put_zz(out, offset_delta);
    if (r->has_key) {
        put_zz(out, r->key_len);
        memcpy(*out, r->key, (size_t)r->key_len);
        *out += r->key_len;
    } else {
        *(*out)++ = 1; /* -1 */
    }
    if (r->has_value) {
        put_zz(out, r->value_len);
        memcpy(*out, r->value, (size_t)r->value_len);
        *out += r->value_len;
    } else {
        *(*out)++ = 1;
    }
    put_zz(out, (int64_t)r->header_count);
    if (!r->header_count) {
        return;
    }
    /* the headers, walked again (parse_record checked them) */
    Wire w = {r->start, r->end};
    while (w.p < w.end) {
        uint64_t field = 0;
        unsigned wt = 0;
        const unsigned char *d = w.p, *k, *v;
        Py_ssize_t n = 0, kn, vn;
        wire_tag(&w, &field, &wt);
        if (field != 5) {
            wire_skip(&w, wt);
            continue;
        }
        wire_bytes(&w, &d, &n);
        parse_header(d, n, &k, &kn, &v, &vn);
        put_zz(out, kn);
        memcpy(*out, k, (size_t)kn);
        *out += kn;
        put_zz(out, vn);
        memcpy(*out, v, (size_t)vn);
        *out += vn;
    }
}

/* A batch body of records[order[from..to)] (bytes), appended as a tuple to `batches`. */
static int add_batch(PyObject *batches, const PlainRecord *records, const uint64_t *order,
                     Py_ssize_t from, Py_ssize_t to, Py_ssize_t size) {
    PyObject *data = PyBytes_FromStringAndSize(NULL, size);
    if (data == NULL) {
        return -1;
    }
    unsigned char *out = (unsigned char *)PyBytes_AS_STRING(data);
    int64_t base = records[(uint32_t)order[from]].timestamp, max = base;
    for (Py_ssize_t i = from; i < to; i++) {
        const PlainRecord *r = &records[(uint32_t)order[i]];
        int64_t delta = r->timestamp - base;
        Py_ssize_t body = record_body_size(r, delta, i - from);
        put_record_v2(&out, r, body, delta, i - from);
        if (r->timestamp > max) {
            max = r->timestamp;
        }
    }
    if (out != (unsigned char *)PyBytes_AS_STRING(data) + size) {
        Py_DECREF(data);
        PyErr_SetString(PyExc_SystemError, "produce_batches: encoded size mismatch");
        return -1;
    }
    PyObject *item = Py_BuildValue("NnLL", data, to - from, (long long)base, (long long)max);
    if (item == NULL) {
        return -1;
    }
    int failed = PyList_Append(batches, item);
    Py_DECREF(item);
    return failed;
}

#define BATCH_HEADER_SIZE 61
#define RECORD_OVERHEAD 24

/* One partition's records (order[from..to)) as batches, as records.py `_encode` makes them. */
static PyObject *partition_batches(const PlainRecord *records, const uint64_t *order,
                                   Py_ssize_t from, Py_ssize_t to, Py_ssize_t batch_size) {
    PyObject *batches = PyList_New(0);
    if (batches == NULL) {
        return NULL;
    }
    Py_ssize_t estimate = 0;
    for (Py_ssize_t i = from; i < to; i++) {
        const PlainRecord *r = &records[(uint32_t)order[i]];
        estimate += r->key_len + r->value_len + r->headers_size + RECORD_OVERHEAD;
    }
    Py_ssize_t start = from, size = BATCH_HEADER_SIZE;
    int64_t base = records[(uint32_t)order[from]].timestamp;
    for (Py_ssize_t i = from; i < to; i++) {
        const PlainRecord *r = &records[(uint32_t)order[i]];
        Py_ssize_t body = record_body_size(r, r->timestamp - base, i - start);
        Py_ssize_t grown = size + zz_size(body) + body;
        if (estimate > batch_size && i > start && grown > batch_size) {
            if (add_batch(batches, records, order, start, i, size - BATCH_HEADER_SIZE) < 0) {
                goto fail;
            }
            start = i;
            base = r->timestamp;
            body = record_body_size(r, 0, 0);
            grown = BATCH_HEADER_SIZE + zz_size(body) + body;
        }
        size = grown;
    }
    if (add_batch(batches, records, order, start, to, size - BATCH_HEADER_SIZE) < 0) {
        goto fail;
    }
    return batches;
fail:
    Py_DECREF(batches);
    return NULL;
}

static PyObject *produce_batches(PyObject *self, PyObject *args) {
    Py_buffer view;
    int partition, partitions;
    PyObject *sticky;
    long long now_ms;
    Py_ssize_t batch_size;
    if (!PyArg_ParseTuple(args, "y*iiOLn", &view, &partition, &partitions, &sticky, &now_ms,
                          &batch_size)) {
        return NULL;
    }
    PyObject *result = NULL, *groups = NULL, *bad = NULL, *assign = NULL;
    PlainRecord *records = NULL;
    uint64_t *order = NULL;
    Py_ssize_t n = 0, cap = 0, valid = 0;
    int sticky_partition = -1;
    if (partitions <= 0) {
        PyErr_SetString(PyExc_ValueError, "a topic has at least one partition");
        goto done;
    }
    Wire w = {view.buf, (const unsigned char *)view.buf + view.len};
    while (w.p < w.end) {
        uint64_t field;
        unsigned wt;
        const unsigned char *d;
        Py_ssize_t len;
        if (wire_tag(&w, &field, &wt) < 0) {
            goto done;
        }
        if (field != 3) {
            if (wire_skip(&w, wt) < 0) {
                goto done;
            }
            continue;
        }
        if (expect_type(wt, 2) < 0 || wire_bytes(&w, &d, &len) < 0) {
            goto done;
        }
        if (n == cap) {
            cap = cap ? cap * 2 : 1024;
            PlainRecord *grown = PyMem_Realloc(records, (size_t)cap * sizeof(PlainRecord));
            if (grown == NULL) {
                PyErr_NoMemory();
                goto done;
            }
            records = grown;
        }
        if (n >= 0x7FFFFFFF) {
            wire_error("too many records");
            goto done;
        }
        if (parse_record(d, len, &records[n]) < 0) {
            goto done;
        }
        n++;
    }
    bad = PyList_New(0);
    assign = PyBytes_FromStringAndSize(NULL, n * (Py_ssize_t)sizeof(int32_t));
    order = PyMem_Malloc((size_t)(n ? n : 1) * sizeof(uint64_t));
    if (bad == NULL || assign == NULL || order == NULL) {
        if (order == NULL) {
            PyErr_NoMemory();
        }
        goto done;
    }
    int32_t *groups_of = (int32_t *)PyBytes_AS_STRING(assign);
    for (Py_ssize_t i = 0; i < n; i++) {
        PlainRecord *r = &records[i];
        groups_of[i] = -1;
        if (r->timestamp < 0) {
            PyObject *item = Py_BuildValue("nL", i, (long long)r->timestamp);
            if (item == NULL || PyList_Append(bad, item) < 0) {
                Py_XDECREF(item);
                goto done;
            }
            Py_DECREF(item);
            continue;
        }
        if (r->timestamp == 0) {
            r->timestamp = now_ms;
        }
        if (partition >= 0) {
            r->partition = partition;
        } else if (r->has_key) {
            r->partition = (int32_t)(((uint32_t)murmur2(r->key, r->key_len) & 0x7FFFFFFFU) %
                                     (uint32_t)partitions);
        } else {
            if (sticky_partition < 0) {
                PyObject *chosen = PyObject_CallNoArgs(sticky);
                if (chosen == NULL) {
                    goto done;
                }
                long value = PyLong_AsLong(chosen);
                Py_DECREF(chosen);
                if (value == -1 && PyErr_Occurred()) {
                    goto done;
                }
                if (value < 0 || value > 0x7FFFFFFF) {
                    PyErr_Format(PyExc_ValueError, "sticky partition %ld out of range", value);
                    goto done;
                }
                sticky_partition = (int)value;
            }
            r->partition = sticky_partition;
        }
        order[valid++] = ((uint64_t)(uint32_t)r->partition << 32) | (uint64_t)i;
    }
    int sorted = 1; /* one partition (sticky, explicit, one key): already in order */
    for (Py_ssize_t i = 1; i < valid && sorted; i++) {
        sorted = order[i - 1] < order[i];
    }
    if (!sorted) {
        qsort(order, (size_t)valid, sizeof(uint64_t), cmp_u64);
    }
    groups = PyList_New(0);
    if (groups == NULL) {
        goto done;
    }
    for (Py_ssize_t from = 0; from < valid;) {
        uint32_t p = (uint32_t)(order[from] >> 32);
        Py_ssize_t to = from;
        Py_ssize_t group = PyList_GET_SIZE(groups);
        while (to < valid && (uint32_t)(order[to] >> 32) == p) {
            groups_of[(uint32_t)order[to]] = (int32_t)group;
            to++;
        }
        PyObject *batches = partition_batches(records, order, from, to, batch_size);
        if (batches == NULL) {
            goto done;
        }
        PyObject *item = Py_BuildValue("INn", (unsigned int)p, batches, to - from);
        if (item == NULL || PyList_Append(groups, item) < 0) {
            Py_XDECREF(item);
            goto done;
        }
        Py_DECREF(item);
        from = to;
    }
    result = PyTuple_Pack(3, groups, assign, bad);
done:
    Py_XDECREF(groups);
    Py_XDECREF(assign);
    Py_XDECREF(bad);
    PyMem_Free(records);
    PyMem_Free(order);
    PyBuffer_Release(&view);
    return result;
}

static int put_tagged_varint(Buf *b, unsigned char tag, uint64_t v) {
    if (v == 0) {
        return 0;
    }
    return put_varint(b, tag) < 0 ? -1 : put_varint(b, v);
}

static int varint_size(uint64_t v) {
    int n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* One RecordResult {partition=1, offset=2, error_code=3, error_message=4} in field 1. */
static int put_result(Buf *out, int64_t partition, int64_t offset, int64_t code,
                      const char *message, Py_ssize_t message_len) {
    unsigned char scalars[40]; /* three tagged varints of at most 11 bytes each */
    Buf b = {scalars, 0, sizeof(scalars)};
    put_tagged_varint(&b, 0x08, (uint64_t)partition);
    put_tagged_varint(&b, 0x10, (uint64_t)offset);
    put_tagged_varint(&b, 0x18, (uint64_t)code);
    size_t body = b.len;
    if (message_len > 0) {
        body += 1 + (size_t)varint_size((uint64_t)message_len) + (size_t)message_len;
    }
    if (buf_reserve(out, 1 + 10 + body) < 0) {
        return -1;
    }
    put_varint(out, 0x0A);
    put_varint(out, body);
    memcpy(out->p + out->len, scalars, b.len);
    out->len += b.len;
    if (message_len > 0) {
        put_varint(out, 0x22);
        put_varint(out, (uint64_t)message_len);
        memcpy(out->p + out->len, message, (size_t)message_len);
        out->len += (size_t)message_len;
    }
    return 0;
}

static PyObject *produce_results(PyObject *self, PyObject *args) {
    PyObject *assign, *partitions, *offsets, *codes, *messages, *bad_messages;
    long long bad_code;
    if (!PyArg_ParseTuple(args, "SO!O!O!O!LO!", &assign, &PyList_Type, &partitions, &PyList_Type,
                          &offsets, &PyList_Type, &codes, &PyList_Type, &messages, &bad_code,
                          &PyList_Type, &bad_messages)) {
        return NULL;
    }
    Py_ssize_t groups = PyList_GET_SIZE(partitions);
    if (PyList_GET_SIZE(offsets) != groups || PyList_GET_SIZE(codes) != groups ||
        PyList_GET_SIZE(messages) != groups) {
        PyErr_SetString(PyExc_ValueError, "produce_results: one item per group in each list");
        return NULL;
    }
    Py_ssize_t n = PyBytes_GET_SIZE(assign) / (Py_ssize_t)sizeof(int32_t);
    const int32_t *group_of = (const int32_t *)PyBytes_AS_STRING(assign);
    int64_t *next = PyMem_Calloc((size_t)(groups ? groups : 1), sizeof(int64_t) * 3);
    const char **texts = PyMem_Calloc((size_t)(groups ? groups : 1), sizeof(char *));
    Py_ssize_t *text_lens = PyMem_Calloc((size_t)(groups ? groups : 1), sizeof(Py_ssize_t));
    Buf out = {0};
    PyObject *result = NULL;
    if (next == NULL || texts == NULL || text_lens == NULL) {
        PyErr_NoMemory();
        goto done;
    }
    /* next[3g]: the group's next offset (-1: none); next[3g+1]: partition; next[3g+2]: code */
    for (Py_ssize_t g = 0; g < groups; g++) {
        long long p = PyLong_AsLongLong(PyList_GET_ITEM(partitions, g));
        long long o = PyLong_AsLongLong(PyList_GET_ITEM(offsets, g));
        long long c = PyLong_AsLongLong(PyList_GET_ITEM(codes, g));
        if (PyErr_Occurred()) {
            goto done;
        }
        texts[g] = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(messages, g), &text_lens[g]);
        if (texts[g] == NULL) {
            goto done;
        }
        next[3 * g] = c != 0 || o < 0 ? -1 : o;
        next[3 * g + 1] = p;
        next[3 * g + 2] = c;
    }
    Py_ssize_t bad = 0;
    if (buf_reserve(&out, (size_t)n * 12 + 16) < 0) {
        goto done;
    }
    for (Py_ssize_t i = 0; i < n; i++) {
        int32_t g = group_of[i];
        int failed;
        if (g < 0) {
            if (bad >= PyList_GET_SIZE(bad_messages)) {
                PyErr_SetString(PyExc_ValueError, "produce_results: a bad record without message");
                goto done;
            }
            Py_ssize_t len;
            const char *text = PyUnicode_AsUTF8AndSize(PyList_GET_ITEM(bad_messages, bad), &len);
            if (text == NULL) {
                goto done;
            }
            bad++;
            failed = put_result(&out, -1, -1, bad_code, text, len);
        } else if (g >= groups) {
            PyErr_SetString(PyExc_ValueError, "produce_results: a record of no group");
            goto done;
        } else {
            int64_t offset = next[3 * g];
            if (offset >= 0) {
                next[3 * g] = offset + 1;
            }
            failed = put_result(&out, next[3 * g + 1], offset, next[3 * g + 2], texts[g],
                                next[3 * g + 2] ? text_lens[g] : 0);
        }
        if (failed < 0) {
            goto done;
        }
    }
    result = PyBytes_FromStringAndSize((const char *)out.p, (Py_ssize_t)out.len);
done:
    PyMem_Free(next);
    PyMem_Free(texts);
    PyMem_Free(text_lens);
    PyMem_Free(out.p);
    return result;
}

/* ---- the producer's append (Appender) ------------------------------------------------------ */

enum { S_CLOSED, S_HEADERS, S_ESTIMATE, S_LIMIT, S_COUNT, S_RESERVED, S_RESULT, S_TIMESTAMPS,
       S_KEYS, S_VALUES, N_SLOTS };
static const char *slot_names[N_SLOTS] = {"closed", "headers", "estimate", "limit", "count",
                                          "reserved", "result", "timestamps", "keys", "values"};

typedef struct {
    PyObject_HEAD
    PyObject *lock;
    PyObject *acquire; /* bound lock.acquire / lock.release */
    PyObject *release;
    PyObject *sticky; /* dict: topic -> batch */
    PyTypeObject *batch_type;
    PyTypeObject *future_type;
    Py_ssize_t overhead;
    Py_ssize_t memory;
    Py_ssize_t offsets[N_SLOTS];
    /* buffer.memory's free bytes: kept here (the accumulator reads and writes it as
     * `appender.available`, under its lock) rather than in a dict per record. */
    Py_ssize_t available;
    /* The last topic looked up in `sticky` and its batch, valid while the dict's version tag
     * (PEP 509: changed by every change to the dict) is the one seen then. */
    PyObject *last_topic;
    PyObject *last_batch;
    uint64_t last_version;
    int raw_lock; /* 1: `lock` is taken without calls when free (RawLock, below) */
} Appender;

/* A threading.Lock as CPython 3.8-3.12 lays it out (Modules/_threadmodule.c's lockobject):
 * the Appender takes and releases a free lock without calling lock.acquire()/release() (whose
 * argument parsing and method calls cost more than the append), after checking at creation
 * that this layout is the lock's (the type, its size, and `locked` following acquire/release
 * on a lock of its own). Elsewhere, or if the check fails, it calls the methods. */
#if PY_VERSION_HEX >= 0x03080000 && PY_VERSION_HEX < 0x030D0000
#define RAW_LOCK 1
typedef struct {
    PyObject_HEAD
    PyThread_type_lock lock_lock;
    PyObject *in_weakreflist;
    char locked;
} RawLock;

/* 1 if `lock` is a _thread.lock laid out as RawLock, 0 if not (or unsure), -1 on error. */
static int raw_lock_ok(PyObject *lock) {
    PyObject *mod = PyImport_ImportModule("_thread");
    if (mod == NULL)
        return -1;
    PyObject *probe = PyObject_CallMethod(mod, "allocate_lock", NULL);
    Py_DECREF(mod);
    if (probe == NULL)
        return -1;
    int ok = Py_TYPE(probe) == Py_TYPE(lock) && Py_TYPE(lock)->tp_basicsize == sizeof(RawLock) &&
             ((RawLock *)probe)->lock_lock != NULL && ((RawLock *)probe)->locked == 0;
    if (ok) {
        PyObject *r = PyObject_CallMethod(probe, "acquire", NULL);
        if (r == NULL) {
            Py_DECREF(probe);
            return -1;
        }
        Py_DECREF(r);
        ok = ((RawLock *)probe)->locked == 1 &&
             !PyThread_acquire_lock(((RawLock *)probe)->lock_lock, NOWAIT_LOCK);
        r = PyObject_CallMethod(probe, "release", NULL);
        if (r == NULL) {
            Py_DECREF(probe);
            return -1;
        }
        Py_DECREF(r);
        ok = ok && ((RawLock *)probe)->locked == 0;
        if (ok && PyThread_acquire_lock(((RawLock *)probe)->lock_lock, NOWAIT_LOCK)) {
            /* free after release(), as it should be: give it back */
            PyThread_release_lock(((RawLock *)probe)->lock_lock);
        } else {
            ok = 0;
        }
    }
    Py_DECREF(probe);
    return ok;
}
#endif

#if PY_VERSION_HEX < 0x030C0000
#define DICT_VERSION(d) (((PyDictObject *)(d))->ma_version_tag)
#else
#define DICT_VERSION(d) ((uint64_t)0) /* deprecated from 3.12: no cache, a lookup per record */
#endif

static PyMemberDef appender_members[] = {
    {"available", T_PYSSIZET, offsetof(Appender, available), 0,
     "buffer.memory's free bytes (read and written under the accumulator's lock)"},
    {NULL},
};

/* GC support: the accumulator's __dict__ holds the appender, which holds the __dict__. */
static int appender_traverse(Appender *a, visitproc visit, void *arg) {
    Py_VISIT(a->lock);
    Py_VISIT(a->acquire);
    Py_VISIT(a->release);
    Py_VISIT(a->sticky);
    Py_VISIT(a->last_topic);
    Py_VISIT(a->last_batch);
    Py_VISIT(a->batch_type);
    Py_VISIT(a->future_type);
    return 0;
}

static int appender_clear(Appender *a) {
    Py_CLEAR(a->lock);
    Py_CLEAR(a->acquire);
    Py_CLEAR(a->release);
    Py_CLEAR(a->sticky);
    Py_CLEAR(a->last_topic);
    Py_CLEAR(a->last_batch);
    Py_CLEAR(a->batch_type);
    Py_CLEAR(a->future_type);
    return 0;
}

static void appender_dealloc(Appender *a) {
    PyObject_GC_UnTrack(a);
    appender_clear(a);
    Py_TYPE(a)->tp_free((PyObject *)a);
}

static PyObject *appender_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *lock, *sticky, *batch_type, *future_type;
    Py_ssize_t available, overhead, memory;
    if (!PyArg_ParseTuple(args, "OO!nO!O!nn", &lock, &PyDict_Type, &sticky, &available,
                          &PyType_Type, &batch_type, &PyType_Type, &future_type, &overhead,
                          &memory))
        return NULL;
    if (!PyType_IsSubtype((PyTypeObject *)future_type, &PyTuple_Type)) {
        PyErr_SetString(PyExc_TypeError, "future_type must be a tuple subclass");
        return NULL;
    }
    Appender *a = (Appender *)type->tp_alloc(type, 0);
    if (a == NULL)
        return NULL;
    for (int i = 0; i < N_SLOTS; i++) {
        PyObject *d = PyObject_GetAttrString(batch_type, slot_names[i]);
        if (d == NULL) {
            Py_DECREF(a);
            return NULL;
        }
        if (!PyObject_TypeCheck(d, &PyMemberDescr_Type) ||
            ((PyMemberDescrObject *)d)->d_member->type != T_OBJECT_EX) {
            Py_DECREF(d);
            Py_DECREF(a);
            PyErr_Format(PyExc_TypeError, "batch_type.%s must be a __slots__ member",
                         slot_names[i]);
            return NULL;
        }
        a->offsets[i] = ((PyMemberDescrObject *)d)->d_member->offset;
        Py_DECREF(d);
    }
    a->acquire = PyObject_GetAttrString(lock, "acquire");
    a->release = PyObject_GetAttrString(lock, "release");
    if (a->acquire == NULL || a->release == NULL) {
        Py_DECREF(a);
        return NULL;
    }
    Py_INCREF(lock);
    a->lock = lock;
    Py_INCREF(sticky);
    a->sticky = sticky;
    a->available = available;
#ifdef RAW_LOCK
    int raw = raw_lock_ok(lock);
    if (raw < 0) {
        Py_DECREF(a);
        return NULL;
    }
    a->raw_lock = raw;
#endif
    Py_INCREF(batch_type);
    a->batch_type = (PyTypeObject *)batch_type;
    Py_INCREF(future_type);
    a->future_type = (PyTypeObject *)future_type;
    a->overhead = overhead;
    a->memory = memory;
    return (PyObject *)a;
}

#define SLOT(obj, i) (*(PyObject **)((char *)(obj) + a->offsets[i]))

/* Store `v` (a new reference, stolen) in slot i of `obj`. */
static void set_slot(Appender *a, PyObject *obj, int i, PyObject *v) {
    PyObject *old = SLOT(obj, i);
    SLOT(obj, i) = v;
    Py_XDECREF(old);
}

/* The append with the lock held: the future, Py_None (not taken) or NULL (error). */
static PyObject *append_locked(Appender *a, PyObject *topic, PyObject *timestamp, PyObject *key,
                               PyObject *value, Py_ssize_t nbytes) {
    PyObject *batch; /* borrowed */
    uint64_t version = DICT_VERSION(a->sticky);
    if (topic == a->last_topic && version != 0 && version == a->last_version) {
        batch = a->last_batch;
    } else {
        batch = PyDict_GetItemWithError(a->sticky, topic);
        if (batch == NULL)
            return PyErr_Occurred() ? NULL : Py_NewRef(Py_None);
        Py_INCREF(topic);
        Py_XSETREF(a->last_topic, topic);
        Py_INCREF(batch);
        Py_XSETREF(a->last_batch, batch);
        a->last_version = version;
    }
    if (Py_TYPE(batch) != a->batch_type)
        Py_RETURN_NONE;
    PyObject *closed = SLOT(batch, S_CLOSED), *headers = SLOT(batch, S_HEADERS);
    PyObject *estimate_o = SLOT(batch, S_ESTIMATE), *limit_o = SLOT(batch, S_LIMIT);
    PyObject *count_o = SLOT(batch, S_COUNT), *reserved_o = SLOT(batch, S_RESERVED);
    PyObject *result = SLOT(batch, S_RESULT), *timestamps = SLOT(batch, S_TIMESTAMPS);
    PyObject *keys = SLOT(batch, S_KEYS), *values = SLOT(batch, S_VALUES);
    if (closed != Py_False || headers != Py_None || estimate_o == NULL || limit_o == NULL ||
        count_o == NULL || reserved_o == NULL || result == NULL || timestamps == NULL ||
        keys == NULL || values == NULL || !PyList_CheckExact(timestamps) ||
        !PyList_CheckExact(keys) || !PyList_CheckExact(values) || !PyLong_CheckExact(estimate_o) ||
        !PyLong_CheckExact(limit_o) || !PyLong_CheckExact(count_o) ||
        !PyLong_CheckExact(reserved_o))
        Py_RETURN_NONE;
    Py_ssize_t estimate = PyLong_AsSsize_t(estimate_o), limit = PyLong_AsSsize_t(limit_o);
    Py_ssize_t count = PyLong_AsSsize_t(count_o), reserved = PyLong_AsSsize_t(reserved_o);
    if ((estimate == -1 || limit == -1 || count == -1 || reserved == -1) && PyErr_Occurred()) {
        PyErr_Clear();
        Py_RETURN_NONE; /* past Py_ssize_t (a limit of 1 << 62 fits): the Python path */
    }
    Py_ssize_t size = estimate + a->overhead + nbytes;
    if (size > limit)
        Py_RETURN_NONE;
    if (a->available < a->memory)
        Py_RETURN_NONE;
    /* Every step that may fail (the future, the batch's new counts, the columns' appends)
     * comes before the first change to the batch and to `available`, so a failure (a
     * MemoryError) leaves both as they were: buffer.memory is charged exactly when the batch's
     * `reserved` says so, which is what gives it back. */
    PyObject *future = a->future_type->tp_alloc(a->future_type, 2);
    if (future == NULL)
        return NULL;
    PyObject *index = Py_NewRef(count_o); /* the record's index is the count before it */
    Py_INCREF(result);
    PyTuple_SET_ITEM(future, 0, result);
    PyTuple_SET_ITEM(future, 1, index); /* the future owns index */
    PyObject *new_count = PyLong_FromSsize_t(count + 1);
    PyObject *new_estimate = PyLong_FromSsize_t(size);
    PyObject *new_reserved = PyLong_FromSsize_t(reserved + a->memory);
    if (new_count == NULL || new_estimate == NULL || new_reserved == NULL)
        goto fail;
    if (PyList_Append(timestamps, timestamp) < 0)
        goto fail;
    if (PyList_Append(keys, key) < 0) {
        PyList_SetSlice(timestamps, count, count + 1, NULL);
        goto fail;
    }
    if (PyList_Append(values, value) < 0) {
        PyList_SetSlice(keys, count, count + 1, NULL);
        PyList_SetSlice(timestamps, count, count + 1, NULL);
        goto fail;
    }
    /* From here nothing fails. */
    a->available -= a->memory;
    set_slot(a, batch, S_COUNT, new_count);
    set_slot(a, batch, S_ESTIMATE, new_estimate);
    set_slot(a, batch, S_RESERVED, new_reserved);
    return future;
fail:
    Py_XDECREF(new_count);
    Py_XDECREF(new_estimate);
    Py_XDECREF(new_reserved);
    Py_DECREF(future);
    return NULL;
}

/* The record appended (its future), Py_None (left to the Python path) or NULL (error). */
static PyObject *appender_append(Appender *a, PyObject *topic, PyObject *timestamp, PyObject *key,
                                 PyObject *value) {
    if (a->acquire == NULL || a->release == NULL || a->sticky == NULL)
        Py_RETURN_NONE; /* cleared by the garbage collector */
    Py_ssize_t nbytes = 0;
    if (value != Py_None) {
        if (!PyBytes_CheckExact(value))
            Py_RETURN_NONE;
        nbytes += PyBytes_GET_SIZE(value);
    }
    if (key != Py_None) {
        if (!PyBytes_CheckExact(key))
            Py_RETURN_NONE;
        nbytes += PyBytes_GET_SIZE(key);
    }
#ifdef RAW_LOCK
    if (a->raw_lock) {
        /* The lock free: taken and given back without a Python call (the GIL is held from
         * here to the release, as with the calls). Held by another thread: the call below,
         * which waits with the GIL released. */
        RawLock *lo = (RawLock *)a->lock;
        if (PyThread_acquire_lock(lo->lock_lock, NOWAIT_LOCK)) {
            lo->locked = 1;
            PyObject *out = append_locked(a, topic, timestamp, key, value, nbytes);
            lo->locked = 0;
            PyThread_release_lock(lo->lock_lock);
            return out;
        }
    }
#endif
    PyObject *r = PyObject_CallNoArgs(a->acquire);
    if (r == NULL)
        return NULL;
    Py_DECREF(r);
    PyObject *out = append_locked(a, topic, timestamp, key, value, nbytes);
    PyObject *exc_type, *exc_value, *exc_tb;
    PyErr_Fetch(&exc_type, &exc_value, &exc_tb);
    r = PyObject_CallNoArgs(a->release);
    if (r == NULL) {
        Py_XDECREF(out);
        Py_XDECREF(exc_type);
        Py_XDECREF(exc_value);
        Py_XDECREF(exc_tb);
        return NULL;
    }
    Py_DECREF(r);
    PyErr_Restore(exc_type, exc_value, exc_tb);
    return out;
}

static PyObject *appender_call(Appender *a, PyObject *args, PyObject *kwargs) {
    PyObject *topic, *timestamp, *key, *value;
    if (kwargs != NULL && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "Appender takes no keyword arguments");
        return NULL;
    }
    if (!PyArg_UnpackTuple(args, "Appender", 4, 4, &topic, &timestamp, &key, &value))
        return NULL;
    return appender_append(a, topic, timestamp, key, value);
}

static PyTypeObject AppenderType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "riverlog.common.records._speedups.Appender",
    .tp_basicsize = sizeof(Appender),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)appender_traverse,
    .tp_clear = (inquiry)appender_clear,
    .tp_doc = "The producer's per-record append to a topic's sticky batch (see the module doc).",
    .tp_new = appender_new,
    .tp_dealloc = (destructor)appender_dealloc,
    .tp_call = (ternaryfunc)appender_call,
    .tp_members = appender_members,
};

/* ---- the futures' base (FuturePair) --------------------------------------------------------- */

/* A 2-tuple whose items read as `_result` and `_index` through member descriptors at the items'
 * offsets: CPython's attribute cache reads them as slots (no call per read, against a property
 * calling an itemgetter). Its __new__ makes only 2-tuples (and tuple.__new__ refuses a subclass
 * of it), so the offsets are always inside the object. */
static PyMemberDef pair_members[] = {
    {"_result", T_OBJECT_EX, offsetof(PyTupleObject, ob_item), READONLY, "item 0"},
    {"_index", T_OBJECT_EX, offsetof(PyTupleObject, ob_item) + sizeof(PyObject *), READONLY,
     "item 1"},
    {NULL},
};

static PyObject *pair_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *t = PyTuple_Type.tp_new(type, args, kwargs);
    if (t != NULL && PyTuple_GET_SIZE(t) != 2) {
        Py_DECREF(t);
        PyErr_SetString(PyExc_TypeError, "a FuturePair is made of exactly 2 items");
        return NULL;
    }
    return t;
}

static PyTypeObject FuturePairType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "riverlog.common.records._speedups.FuturePair",
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE,
    .tp_doc = "A (result, index) 2-tuple read as ._result and ._index (see above).",
    .tp_members = pair_members,
    .tp_new = pair_new,
};

/* ---- Producer.send's common case (SendFast) ------------------------------------------------- */

typedef struct {
    PyObject_HEAD
    vectorcallfunc vectorcall;
    Appender *appender;
    PyObject *topics; /* dict: topic -> TopicInfo (a tuple: expires_at at index 2) */
    PyObject *send;   /* the Python send, for everything else */
    Py_ssize_t max_record;
    int ignore_keys;
    long long last_ms; /* the last timestamp made, shared by the records of the same ms */
    PyObject *last_timestamp;
} SendFast;

static PyObject *str_key, *str_value;

/* GC support: the producer holds its SendFast (as `send`), which holds the bound Python send. */
static int sendfast_traverse(SendFast *f, visitproc visit, void *arg) {
    Py_VISIT(f->appender);
    Py_VISIT(f->topics);
    Py_VISIT(f->send);
    return 0;
}

static int sendfast_clear(SendFast *f) {
    Py_CLEAR(f->last_timestamp);
    Py_CLEAR(f->appender);
    Py_CLEAR(f->topics);
    Py_CLEAR(f->send);
    return 0;
}

static void sendfast_dealloc(SendFast *f) {
    PyObject_GC_UnTrack(f);
    sendfast_clear(f);
    Py_TYPE(f)->tp_free((PyObject *)f);
}

static PyObject *sendfast_vectorcall(PyObject *self, PyObject *const *args, size_t nargsf,
                                     PyObject *kwnames) {
    SendFast *f = (SendFast *)self;
    Py_ssize_t nargs = PyVectorcall_NARGS(nargsf);
    PyObject *topic = NULL, *value = Py_None, *key = Py_None;
    if (f->send == NULL || f->appender == NULL || f->topics == NULL) {
        PyErr_SetString(PyExc_RuntimeError, "SendFast used after it was cleared");
        return NULL;
    }
    if (nargs < 1 || nargs > 6)
        goto python;
    for (Py_ssize_t i = 3; i < nargs; i++)
        if (args[i] != Py_None)
            goto python; /* headers, partition, timestamp_ms given */
    topic = args[0];
    if (nargs > 1)
        value = args[1];
    if (nargs > 2)
        key = args[2];
    if (kwnames != NULL) {
        Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
        for (Py_ssize_t i = 0; i < nk; i++) {
            PyObject *name = PyTuple_GET_ITEM(kwnames, i);
            if (name == str_value && nargs < 2)
                value = args[nargs + i];
            else if (name == str_key && nargs < 3)
                key = args[nargs + i];
            else
                goto python; /* any other keyword (callback, ...), or a repeat */
        }
    }
    if (!PyUnicode_CheckExact(topic) || (key != Py_None && !f->ignore_keys))
        goto python;
    if (value != Py_None && (!PyBytes_CheckExact(value) ||
                             PyBytes_GET_SIZE(value) > f->max_record))
        goto python;
    PyObject *info = PyDict_GetItemWithError(f->topics, topic); /* borrowed */
    if (info == NULL) {
        if (PyErr_Occurred())
            return NULL;
        goto python;
    }
    if (!PyTuple_Check(info) || PyTuple_GET_SIZE(info) < 3 ||
        !PyFloat_CheckExact(PyTuple_GET_ITEM(info, 2)))
        goto python;
    struct timespec now;
    if (clock_gettime(CLOCK_MONOTONIC, &now) != 0)
        goto python;
    if (PyFloat_AS_DOUBLE(PyTuple_GET_ITEM(info, 2)) < (double)now.tv_sec + now.tv_nsec * 1e-9)
        goto python; /* stale: the Python path refreshes it */
    if (clock_gettime(CLOCK_REALTIME, &now) != 0)
        goto python;
    long long ms = (long long)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    PyObject *timestamp = f->last_timestamp;
    if (timestamp != NULL && ms == f->last_ms) {
        Py_INCREF(timestamp); /* one int object per ms, not per record */
    } else {
        timestamp = PyLong_FromLongLong(ms);
        if (timestamp == NULL)
            return NULL;
        Py_XSETREF(f->last_timestamp, Py_NewRef(timestamp));
        f->last_ms = ms;
    }
    PyObject *future = appender_append(f->appender, topic, timestamp, key, value);
    Py_DECREF(timestamp);
    if (future != Py_None)
        return future; /* or NULL: an error */
    Py_DECREF(future);
python:
    return PyObject_Vectorcall(f->send, args, nargsf, kwnames);
}

static PyObject *sendfast_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *appender, *topics, *send;
    Py_ssize_t max_record;
    int ignore_keys;
    if (!PyArg_ParseTuple(args, "O!O!Onp", &AppenderType, &appender, &PyDict_Type, &topics, &send,
                          &max_record, &ignore_keys))
        return NULL;
    SendFast *f = (SendFast *)type->tp_alloc(type, 0);
    if (f == NULL)
        return NULL;
    f->vectorcall = sendfast_vectorcall;
    Py_INCREF(appender);
    f->appender = (Appender *)appender;
    Py_INCREF(topics);
    f->topics = topics;
    Py_INCREF(send);
    f->send = send;
    f->max_record = max_record;
    f->ignore_keys = ignore_keys;
    return (PyObject *)f;
}

static PyTypeObject SendFastType = {
    PyVarObject_HEAD_INIT(NULL, 0).tp_name = "riverlog.common.records._speedups.SendFast",
    .tp_basicsize = sizeof(SendFast),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL | Py_TPFLAGS_HAVE_GC,
    .tp_traverse = (traverseproc)sendfast_traverse,
    .tp_clear = (inquiry)sendfast_clear,
    .tp_doc = "Producer.send's common case in C, the rest to the Python send (see the module doc).",
    .tp_new = sendfast_new,
    .tp_dealloc = (destructor)sendfast_dealloc,
    .tp_call = PyVectorcall_Call,
    .tp_vectorcall_offset = offsetof(SendFast, vectorcall),
};

/* ---- the producer's records from columns (encode_columns) ---------------------------------- */

/* The size of the zigzag varint of v. */
static inline Py_ssize_t cz_size(long long v) {
    unsigned long long z = ((unsigned long long)v << 1) ^ (unsigned long long)(v >> 63);
    Py_ssize_t n = 1;
    while (z >= 0x80) {
        z >>= 7;
        n++;
    }
    return n;
}

static inline char *col_zz_put(char *p, long long v) {
    unsigned long long z = ((unsigned long long)v << 1) ^ (unsigned long long)(v >> 63);
    while (z >= 0x80) {
        *p++ = (char)(z | 0x80);
        z >>= 7;
    }
    *p++ = (char)z;
    return p;
}

/* The length of a key or value column item (-1: None), or -2: not bytes or past int32. */
static inline long long item_len(PyObject *o) {
    if (o == Py_None)
        return -1;
    if (!PyBytes_CheckExact(o) || PyBytes_GET_SIZE(o) > INT32_MAX)
        return -2;
    return PyBytes_GET_SIZE(o);
}

/* encode_columns(timestamps, keys, values) -> bytes or None: the records of a batch without
 * headers, byte for byte as encode_columns.encode_records; None (nothing raised) for anything
 * it leaves to the Python path: not three lists of one length, a timestamp not an int within
 * int64 or below -1, a delta past int64, a key or value not bytes or None, no records. */
static PyObject *encode_columns(PyObject *self, PyObject *args) {
    PyObject *timestamps, *keys, *values;
    if (!PyArg_UnpackTuple(args, "encode_columns", 3, 3, &timestamps, &keys, &values))
        return NULL;
    if (!PyList_CheckExact(timestamps) || !PyList_CheckExact(keys) || !PyList_CheckExact(values))
        Py_RETURN_NONE;
    Py_ssize_t n = PyList_GET_SIZE(values);
    if (n == 0 || PyList_GET_SIZE(timestamps) != n || PyList_GET_SIZE(keys) != n ||
        n > INT32_MAX)
        Py_RETURN_NONE;
    long long *deltas = PyMem_Malloc(sizeof(long long) * (size_t)n);
    if (deltas == NULL)
        return PyErr_NoMemory();
    Py_ssize_t total = 0;
    long long base = 0;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *t = PyList_GET_ITEM(timestamps, i);
        long long k = item_len(PyList_GET_ITEM(keys, i));
        long long v = item_len(PyList_GET_ITEM(values, i));
        if (!PyLong_CheckExact(t) || k == -2 || v == -2)
            goto python;
        int overflow = 0;
        long long ts = PyLong_AsLongLongAndOverflow(t, &overflow);
        if (overflow || (ts == -1 && PyErr_Occurred()) || ts < -1)
            goto python;
        if (i == 0)
            base = ts;
        long long delta;
        if (__builtin_sub_overflow(ts, base, &delta))
            goto python;
        deltas[i] = delta;
        /* attributes, delta, offset delta, key length, key, value length, value, 0 headers */
        Py_ssize_t body = 1 + cz_size(delta) + cz_size(i) + cz_size(k) + (k > 0 ? k : 0) +
                          cz_size(v) + (v > 0 ? v : 0) + 1;
        total += cz_size(body) + body;
    }
    PyObject *out = PyBytes_FromStringAndSize(NULL, total);
    if (out == NULL) {
        PyMem_Free(deltas);
        return NULL;
    }
    char *p = PyBytes_AS_STRING(out);
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *ko = PyList_GET_ITEM(keys, i), *vo = PyList_GET_ITEM(values, i);
        long long k = item_len(ko), v = item_len(vo);
        Py_ssize_t body = 1 + cz_size(deltas[i]) + cz_size(i) + cz_size(k) + (k > 0 ? k : 0) +
                          cz_size(v) + (v > 0 ? v : 0) + 1;
        p = col_zz_put(p, body);
        *p++ = 0;
        p = col_zz_put(p, deltas[i]);
        p = col_zz_put(p, i);
        p = col_zz_put(p, k);
        if (k > 0) {
            memcpy(p, PyBytes_AS_STRING(ko), (size_t)k);
            p += k;
        }
        p = col_zz_put(p, v);
        if (v > 0) {
            memcpy(p, PyBytes_AS_STRING(vo), (size_t)v);
            p += v;
        }
        *p++ = 0;
    }
    PyMem_Free(deltas);
    if (p != PyBytes_AS_STRING(out) + total) { /* cannot happen: the sizes were added above */
        Py_DECREF(out);
        PyErr_SetString(PyExc_SystemError, "encode_columns: size mismatch");
        return NULL;
    }
    return out;
python:
    PyMem_Free(deltas);
    if (PyErr_Occurred())
        PyErr_Clear();
    Py_RETURN_NONE;
}

static PyMethodDef methods[] = {
    {"decode_into", decode_into, METH_VARARGS, "Parse one batch's records into five lists."},
    {"rows_into", rows_into, METH_VARARGS, "Parse one batch's records into row tuples."},
    {"wire_into", wire_into, METH_VARARGS, "One batch's records as protobuf Records."},
    {"produce_request", produce_request, METH_VARARGS,
     "A serialized ProduceRecordsRequest's fields other than its records."},
    {"produce_batches", produce_batches, METH_VARARGS,
     "A serialized ProduceRecordsRequest's records as RecordBatch v2 bodies by partition."},
    {"produce_results", produce_results, METH_VARARGS,
     "ProduceRecordsResponse's results, encoded."},
    {"encode_columns", encode_columns, METH_VARARGS,
     "A batch's records without headers from its columns, or None for the Python path."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_speedups",
    .m_doc = "RecordBatch v2 record loop in C (optional).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__speedups(void) {
    FuturePairType.tp_base = &PyTuple_Type;
    if (PyType_Ready(&FuturePairType) < 0)
        return NULL;
    if (PyType_Ready(&AppenderType) < 0)
        return NULL;
    if (PyType_Ready(&SendFastType) < 0)
        return NULL;
    str_key = PyUnicode_InternFromString("key");
    str_value = PyUnicode_InternFromString("value");
    if (str_key == NULL || str_value == NULL)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&AppenderType);
    if (PyModule_AddObject(m, "Appender", (PyObject *)&AppenderType) < 0) {
        Py_DECREF(&AppenderType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&SendFastType);
    if (PyModule_AddObject(m, "SendFast", (PyObject *)&SendFastType) < 0) {
        Py_DECREF(&SendFastType);
        Py_DECREF(m);
        return NULL;
    }
    Py_INCREF(&FuturePairType);
    if (PyModule_AddObject(m, "FuturePair", (PyObject *)&FuturePairType) < 0) {
        Py_DECREF(&FuturePairType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
