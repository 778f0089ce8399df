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
 *       fixed_ts replaces every timestamp unless it is None (log append time).
 *
 *   wire_into(buf, start, end, count, base_offset, base_ts, min_offset, ts_type, fixed_ts,
 *             limit, out) -> (added, last_offset)
 *       appends, for each record at or after min_offset (at most `limit` of them, 0: all), the
 *       record as a protobuf `riverlog.v1.Record` in field 3 of FetchRecordsResponse
 *       (tag, length, body) to the bytearray `out`: what the gateway's FetchRecords answers,
 *       without a Python object per record field. last_offset is the last added record's
 *       offset (-1 if none).
 *
 * `buf` is bytes; the records are buf[start:end] (no copy of an uncompressed batch's body).
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <string.h>

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

static int check_cursor(PyObject *buf, Py_ssize_t start, Py_ssize_t end, Cursor *c) {
    if (!PyBytes_Check(buf)) {
        PyErr_SetString(PyExc_TypeError, "records must be bytes");
        return -1;
    }
    if (start < 0 || end < start || end > PyBytes_GET_SIZE(buf)) {
        PyErr_SetString(PyExc_IndexError, "bad records range");
        return -1;
    }
    c->p = (const unsigned char *)PyBytes_AS_STRING(buf);
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
    if (!PyArg_ParseTuple(args, "SnnnLLLO!O!O!O!O!", &buf, &start, &end, &count, &base_offset,
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
    if (!PyArg_ParseTuple(args, "SnnnLLLO!OOOOO!", &buf, &start, &end, &count, &base_offset,
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
    if (!PyArg_ParseTuple(args, "SnnnLLLlOnO!", &buf, &start, &end, &count, &base_offset,
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

static PyMethodDef methods[] = {
    {"decode_into", decode_into, METH_VARARGS, "Parse one batch's records into five lists."},
    {"rows_into", rows_into, METH_VARARGS, "Parse one batch's records into row tuples."},
    {"wire_into", wire_into, METH_VARARGS, "One batch's records as protobuf Records."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT,
    .m_name = "_speedups",
    .m_doc = "RecordBatch v2 record loop in C (optional).",
    .m_size = -1,
    .m_methods = methods,
};

PyMODINIT_FUNC PyInit__speedups(void) { return PyModule_Create(&module); }
