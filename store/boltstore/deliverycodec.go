package boltstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/triggerd/triggerd/store"
)

// The delivery log stores the records of one write, one tenant and one
// id group (deliveries.go) as one value, encoded compactly: JSON spent
// more CPU than bbolt's pages, and half its bytes were field names.
//
// A value is deliveryCodecV1, then the number of records (uvarint), then
// the records: their fields in a fixed order, strings as below, Status,
// ReceivedAt's Unix seconds and zone offset as varints, its nanoseconds
// as a uvarint, a flags byte (1: Redelivery), and the events (a count,
// then each event's ID, Kind and Summary).
//
// A string is a uvarint tag, then bytes: tag&3 == 0: tag>>2 bytes of
// text; tag&3 == 1: tag>>2 bytes of text that later strings of the value
// may repeat; tag&3 == 2: the (tag>>2)th of those repeatable strings
// again. Fields that usually repeat within a write (tenant, connector,
// hook, event, answer, summary...) are written as repeatable, ids as
// text only.
const deliveryCodecV1 = 1

// deliveryEncoder appends records to one value.
type deliveryEncoder struct {
	buf  []byte
	dict map[string]uint64
}

func newDeliveryEncoder(n int) *deliveryEncoder {
	e := &deliveryEncoder{buf: make([]byte, 0, 16+n*160), dict: make(map[string]uint64, 16)}
	e.buf = append(e.buf, deliveryCodecV1)
	e.buf = binary.AppendUvarint(e.buf, uint64(n))
	return e
}

// text appends s as text only.
func (e *deliveryEncoder) text(s string) {
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s))<<2)
	e.buf = append(e.buf, s...)
}

// repeatable appends s as a reference to an earlier copy, or as a string
// later ones may refer to.
func (e *deliveryEncoder) repeatable(s string) {
	if s == "" {
		e.buf = append(e.buf, 0)
		return
	}
	if i, ok := e.dict[s]; ok {
		e.buf = binary.AppendUvarint(e.buf, i<<2|2)
		return
	}
	e.dict[s] = uint64(len(e.dict))
	e.buf = binary.AppendUvarint(e.buf, uint64(len(s))<<2|1)
	e.buf = append(e.buf, s...)
}

// add appends d; the value must hold as many records as newDeliveryEncoder
// was told.
func (e *deliveryEncoder) add(d *store.DeliveryRecord) {
	e.text(d.ID)
	e.repeatable(d.TenantID)
	e.repeatable(d.Connector)
	e.text(d.DeliveryID)
	e.text(d.Key)
	e.repeatable(d.Hook)
	e.repeatable(d.Event)
	e.repeatable(d.Action)
	e.repeatable(d.Summary)
	e.repeatable(d.Answer)
	e.buf = binary.AppendVarint(e.buf, int64(d.Status))
	e.repeatable(d.Code)
	e.repeatable(d.Message)
	_, offset := d.ReceivedAt.Zone()
	e.buf = binary.AppendVarint(e.buf, d.ReceivedAt.Unix())
	e.buf = binary.AppendUvarint(e.buf, uint64(d.ReceivedAt.Nanosecond()))
	e.buf = binary.AppendVarint(e.buf, int64(offset))
	var flags byte
	if d.Redelivery {
		flags |= 1
	}
	e.buf = append(e.buf, flags)
	e.buf = binary.AppendUvarint(e.buf, uint64(len(d.Events)))
	for _, ev := range d.Events {
		e.text(ev.ID)
		e.repeatable(ev.Kind)
		e.repeatable(ev.Summary)
	}
}

// encodeDeliveries encodes ds as one value.
func encodeDeliveries(ds []*store.DeliveryRecord) []byte {
	e := newDeliveryEncoder(len(ds))
	for _, d := range ds {
		e.add(d)
	}
	return e.buf
}

var errDeliveryCodec = errors.New("malformed delivery log value")

// deliveryDecoder reads a value. Its strings share one copy of it.
type deliveryDecoder struct {
	s    string
	i    int
	dict []string
	err  error
}

func (d *deliveryDecoder) fail() {
	if d.err == nil {
		d.err = fmt.Errorf("%w at byte %d", errDeliveryCodec, d.i)
	}
	d.i = len(d.s)
}

func (d *deliveryDecoder) uvarint() uint64 {
	var x uint64
	var shift uint
	for d.i < len(d.s) {
		b := d.s[d.i]
		d.i++
		if b < 0x80 {
			if shift == 63 && b > 1 {
				break
			}
			return x | uint64(b)<<shift
		}
		x |= uint64(b&0x7f) << shift
		shift += 7
		if shift > 63 {
			break
		}
	}
	d.fail()
	return 0
}

func (d *deliveryDecoder) varint() int64 {
	u := d.uvarint()
	x := int64(u >> 1)
	if u&1 != 0 {
		x = ^x
	}
	return x
}

func (d *deliveryDecoder) byte() byte {
	if d.i >= len(d.s) {
		d.fail()
		return 0
	}
	d.i++
	return d.s[d.i-1]
}

func (d *deliveryDecoder) str() string {
	tag := d.uvarint()
	n := tag >> 2
	switch tag & 3 {
	case 0, 1:
		if n > uint64(len(d.s)-d.i) {
			d.fail()
			return ""
		}
		s := d.s[d.i : d.i+int(n)]
		d.i += int(n)
		if tag&3 == 1 {
			d.dict = append(d.dict, s)
		}
		return s
	case 2:
		if n >= uint64(len(d.dict)) {
			d.fail()
			return ""
		}
		return d.dict[n]
	}
	d.fail()
	return ""
}

// decodeDeliveries decodes a value encodeDeliveries made.
func decodeDeliveries(v []byte) ([]store.DeliveryRecord, error) {
	d := &deliveryDecoder{s: string(v)}
	if ver := d.byte(); ver != deliveryCodecV1 {
		return nil, fmt.Errorf("%w: unknown version %d", errDeliveryCodec, ver)
	}
	n := d.uvarint()
	if n > uint64(len(v)) { // every record takes more than a byte
		d.fail()
		return nil, d.err
	}
	out := make([]store.DeliveryRecord, n)
	var zone *time.Location // the last offset's, shared by records
	var zoneOffset int64
	for i := range out {
		r := &out[i]
		r.ID = d.str()
		r.TenantID = d.str()
		r.Connector = d.str()
		r.DeliveryID = d.str()
		r.Key = d.str()
		r.Hook = d.str()
		r.Event = d.str()
		r.Action = d.str()
		r.Summary = d.str()
		r.Answer = d.str()
		r.Status = int(d.varint())
		r.Code = d.str()
		r.Message = d.str()
		sec, nsec, offset := d.varint(), d.uvarint(), d.varint()
		if nsec >= 1e9 {
			d.fail()
		}
		r.ReceivedAt = time.Unix(sec, int64(nsec))
		if offset == 0 {
			r.ReceivedAt = r.ReceivedAt.UTC()
		} else {
			if zone == nil || zoneOffset != offset {
				zone, zoneOffset = time.FixedZone("", int(offset)), offset
			}
			r.ReceivedAt = r.ReceivedAt.In(zone)
		}
		r.Redelivery = d.byte()&1 != 0
		if ne := d.uvarint(); ne > 0 {
			if ne > uint64(len(d.s)-d.i) {
				d.fail()
				break
			}
			r.Events = make([]store.DeliveryEvent, ne)
			for j := range r.Events {
				r.Events[j] = store.DeliveryEvent{ID: d.str(), Kind: d.str(), Summary: d.str()}
			}
		}
		if d.err != nil {
			return nil, d.err
		}
	}
	if d.err == nil && d.i != len(d.s) {
		d.fail()
	}
	return out, d.err
}
